import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcConnection } from '../src/platforms/irc/irc-connection.js';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';

const skip = ircSkipReason();
const log = pino({ level: 'silent' });

/**
 * A connection's flood limit (HERALD_IRC_LINES_PER_SECOND, "after a burst of 5"): five lines go
 * at once, the rest one per interval. Only lower bounds of time are asserted (a slow machine
 * delays lines, it cannot hurry them).
 */
describe.skipIf(skip !== undefined)('IRC pacing, on a real InspIRCd', () => {
  let ircd: Ircd;
  let conn: IrcConnection;

  beforeAll(async () => {
    ircd = await startIrcd();
    conn = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick: 'pacer', log, linesPerSecond: 2, echoTimeoutMs: 10_000 });
    await conn.connect();
    await conn.join('#pace');
  });

  afterAll(async () => {
    await conn?.close();
    await ircd?.dispose();
  });

  it('lets a burst of 5 lines out at once, then one line per interval', async () => {
    const interval = 500;
    const start = Date.now();
    const done = await Promise.all(Array.from({ length: 12 }, (_, i) => conn.send('#pace', `line ${i}`, {}, AbortSignal.timeout(30_000)).then(() => Date.now() - start)));
    // The sixth line waits one interval, the twelfth seven.
    expect(done.filter((ms) => ms < interval).length).toBeLessThanOrEqual(5);
    expect(Math.max(...done)).toBeGreaterThanOrEqual((12 - 5) * interval - 20);
  }, 60_000);
});
