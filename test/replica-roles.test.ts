import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

const skip = ircSkipReason();

/**
 * A process that runs no jobs (API only) could not send on IRC's connections: it never takes the
 * `irc:observer` lease (on PGlite, where one process holds it at once, nor on PostgreSQL), so the
 * holder is always a process whose dispatcher can send.
 */
describe.skipIf(skip !== undefined)('an API-only process and the IRC lease', () => {
  let ircd: Ircd;
  let h: TestHerald | undefined;

  beforeAll(async () => {
    ircd = await startIrcd();
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await ircd?.dispose();
  }, 30_000);

  it('stays on standby and never connects an observer', async () => {
    h = await startTestHerald({ env: { HERALD_IRC_URL: ircd.url, HERALD_IRC_NICK: 'herald', HERALD_IRC_CHANNELS: '#agents' }, roles: { http: true, dispatcher: false } });
    const readyz = (await h.bridge.get('/readyz')).json as { checks: Record<string, string>; singletons?: Record<string, string> };
    // Before: `held` (and an observer on the network) in a process that cannot send.
    expect(readyz.singletons?.['irc:observer']).toBe('standby');
    expect(readyz.checks['irc']).toBe('standby');
  }, 90_000);
});
