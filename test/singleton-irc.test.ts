import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcConnection, type ChannelLine } from '../src/platforms/irc/irc-connection.js';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';
import type { HeraldProcess } from './support/process.js';
import { crashRig } from './support/rigs.js';
import { waitFor } from './support/wait.js';

const log = pino({ level: 'silent' });

/**
 * Two `herald serve` replicas with IRC on one PostgreSQL: every IRC connection lives on the replica
 * holding `irc:observer`, so the channel shows one observer, a line sent through either replica is
 * written once, and the other replica takes the connections over when the holder is killed.
 */
// Two replicas need PostgreSQL; the IRC server is a tool CI installs (.ci/check-tools), so its
// absence fails the test rather than skipping it.
describe.skipIf(!onPostgres)('the IRC observer across two replicas', () => {
  const rig = crashRig();
  const { procs, bridgeToken } = rig;
  let ircd: Ircd;
  let eve: { conn: IrcConnection; lines: ChannelLine[] } | undefined;

  beforeAll(async () => {
    const missing = ircSkipReason();
    if (missing !== undefined) throw new Error(missing);
    ircd = await startIrcd();
  }, 60_000);
  afterAll(async () => {
    await eve?.conn.close();
    await ircd?.dispose();
  });

  const readyz = async (p: HeraldProcess) => (await client(p.url ?? '', bridgeToken).get('/readyz')).json as { checks: Record<string, string>; singletons?: Record<string, string> };
  /** Herald's observers in the channel, as another user on the network sees them. */
  const observers = async (): Promise<string[]> => ((await eve?.conn.names('#agents')) ?? []).filter((n) => /^herald_*$/i.test(n.replace(/^[@+%~&]/, '')));
  /** Send a chat line through a replica and wait until it is delivered. */
  const say = async (through: HeraldProcess, text: string): Promise<void> => {
    const api = client(through.url ?? '', bridgeToken);
    const sent = await api.post('/mcp/chat/messages', { channel: '#agents', text, sender: 'ada', transport: 'irc' });
    expect(sent.status).toBe(202);
    const id = (sent.json as { id: string }).id;
    await waitFor(async () => ((await api.get(`/mcp/chat/messages/${id}`)).json as { state: string }).state === 'delivered', `${text} to be delivered`, 30_000);
  };
  const seen = (text: string): number => eve?.lines.filter((l) => l.text === text).length ?? 0;

  it('one observer in the channel; lines sent through the standby go out once; the standby takes over within 15 s of a SIGKILL', async () => {
    await rig.database();
    const env = rig.env({ HERALD_IRC_URL: ircd.url, HERALD_IRC_NICK: 'herald', HERALD_IRC_CHANNELS: '#agents', HERALD_IRC_LINES_PER_SECOND: '50', HERALD_IRC_ECHO_TIMEOUT_MS: '3000' });
    const first = await procs.start(['serve'], env);
    const lines: ChannelLine[] = [];
    const conn = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick: 'eve', log, linesPerSecond: 100, echoTimeoutMs: 5_000, onLine: (l) => lines.push(l) });
    eve = { conn, lines };
    await conn.connect();
    await conn.join('#agents');
    await waitFor(async () => (await observers()).length === 1, 'the first replica\'s observer in #agents', 20_000);
    const second = await procs.start(['serve'], env);
    await waitFor(async () => (await readyz(second)).singletons?.['irc:observer']?.startsWith('standby (held by ') === true, 'the second replica on standby', 10_000);
    expect((await readyz(first)).singletons).toMatchObject({ 'irc:observer': 'held' });
    expect((await readyz(second)).checks['irc']).toMatch(/^standby \(held by .+\)$/);

    // Through either replica, each line is written once, by the holder.
    for (const [i, p] of [first, second, second, first, second].entries()) await say(p, `before ${i}`);
    await waitFor(() => seen('before 4') === 1, 'the last line at eve');
    for (let i = 0; i < 5; i++) expect(seen(`before ${i}`)).toBe(1);
    // Still one observer: the standby never joined.
    expect(await observers()).toHaveLength(1);

    const killed = performance.now();
    first.kill('SIGKILL');
    await first.exited;
    await waitFor(async () => (await readyz(second)).singletons?.['irc:observer'] === 'held' && (await observers()).length === 1 && (await readyz(second)).checks['irc'] === 'ok', 'the second replica\'s observer in #agents', 20_000);
    const takeoverMs = performance.now() - killed;
    console.log(`irc:observer takeover after SIGKILL: ${Math.round(takeoverMs)} ms`);
    expect(takeoverMs).toBeLessThan(15_000);

    await say(second, 'after');
    await waitFor(() => seen('after') === 1, 'the line after the takeover at eve');
    expect(await observers()).toHaveLength(1);
  }, 120_000);
});
