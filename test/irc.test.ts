import { rm, mkdtemp } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.js';
import { openStore } from '../src/infra/db/database.js';
import type { Database } from '../src/schema.js';
import { startHttp } from '../src/mcp/run.js';
import { createLogger } from '../src/infra/log.js';
import { DELIVERY_TAG, IrcConnection, type ChannelLine } from '../src/platforms/irc/irc-connection.js';
import { ircLineBudget } from '../src/platforms/irc/split.js';
import { splitForIrc } from '../src/platforms/irc/split.js';
import { payloadHash } from '../src/modules/deliveries/delivery.js';
import { expectValidResponse } from './support/client.js';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';
import { IDS, newRequestId, newToken, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

const skip = ircSkipReason();
if (skip !== undefined) console.warn(`\n*** ${skip} ***\n`);

const log = pino({ level: 'silent' });

/** Another IRC user in the channel, outside Herald: what people on the network actually see. */
async function witness(ircd: Ircd, nick: string, channels: string[]): Promise<{ conn: IrcConnection; lines: ChannelLine[] }> {
  const lines: ChannelLine[] = [];
  const conn = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick, log, linesPerSecond: 100, echoTimeoutMs: 5_000, onLine: (l) => lines.push(l) });
  await conn.connect();
  for (const c of channels) await conn.join(c);
  return { conn, lines };
}

const textOf = (r: unknown): string => ((r as { content: { text: string }[] }).content[0]?.text ?? '');

describe.skipIf(skip !== undefined)('IRC beside Discord, on a real InspIRCd', () => {
  let ircd: Ircd;
  let h: TestHerald;
  /** The first Herald's sandbox and database: a restarted Herald reuses them, so they are closed here. */
  let first: TestHerald | undefined;
  let mcp: Client;
  let mcpServer: HttpServer;
  let stateDir: string;
  let eve: { conn: IrcConnection; lines: ChannelLine[] };
  const mcpToken = newToken();
  const ircEnv = (): Record<string, string> => ({
    HERALD_IRC_URL: ircd.url,
    HERALD_IRC_NICK: 'herald',
    HERALD_IRC_CHANNELS: '#agents',
    HERALD_IRC_LINES_PER_SECOND: '50',
    HERALD_IRC_ECHO_TIMEOUT_MS: '3000',
  });

  beforeAll(async () => {
    ircd = await startIrcd();
    h = await startTestHerald({ env: ircEnv() });
    first = h;
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-irc-mcp-'));
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(stateDir, 's.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: mcpToken, HERALD_MCP_WAIT_MS: '15000' });
    ({ server: mcpServer } = await startHttp(config, h.bridgeToken, mcpToken, createLogger('silent')).then((r) => {
      mcp = new Client({ name: 'irc-test', version: '1.0.0' });
      return mcp.connect(new StreamableHTTPClientTransport(new URL(r.url), { requestInit: { headers: { authorization: `Bearer ${mcpToken}` } } })).then(() => r);
    }));
    eve = await witness(ircd, 'eve', ['#agents']);
  });

  afterAll(async () => {
    await eve?.conn.close();
    await mcp?.close();
    await new Promise<void>((resolve) => (mcpServer === undefined ? resolve() : mcpServer.close(() => resolve())));
    if (h !== first) await h?.herald.close();
    await first?.close();
    await ircd?.dispose();
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
  });

  it('two agents talk in one channel under their own nicks; the labeled echo is the proof', async () => {
    const a = textOf(await mcp.callTool({ name: 'send_message', arguments: { channel: '#agents', text: 'hello from ada', sender: 'ada' } }));
    expect(a).toContain('the server confirmed it');
    const b = textOf(await mcp.callTool({ name: 'send_message', arguments: { channel: 'agents', text: 'hi ada, bob here', sender: 'bob' } }));
    expect(b).toContain('the server confirmed it');
    // Someone else on the network sees each line once, from the agent's own nick, tagged with the send.
    await waitFor(() => eve.lines.some((l) => l.text === 'hi ada, bob here'), 'eve to see bob');
    const seen = eve.lines.filter((l) => l.text === 'hello from ada' || l.text === 'hi ada, bob here');
    expect(seen.map((l) => [l.nick, l.text])).toEqual([
      ['ada', 'hello from ada'],
      ['bob', 'hi ada, bob here'],
    ]);
    expect(seen.every((l) => l.deliveryTag !== undefined && l.msgid !== undefined)).toBe(true);
    // The send's state carries the msgid the server's echo gave: the same eve saw.
    const send = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'state check', sender: 'ada' });
    expect(send.status).toBe(202);
    await expectValidResponse('POST', '/mcp/chat/messages', 202, send.json);
    const id = (send.json as { id: string }).id;
    const done = await waitFor(async () => {
      const r = await h.bridge.get(`/mcp/chat/messages/${id}`);
      return (r.json as { state: string }).state === 'delivered' ? r : undefined;
    }, 'the send to be delivered');
    await expectValidResponse('GET', '/mcp/chat/messages/{id}', 200, done.json);
    const ids = (done.json as { message_ids: string[] }).message_ids;
    await waitFor(() => eve.lines.some((l) => l.text === 'state check'), 'eve to see it');
    expect(ids).toEqual([eve.lines.find((l) => l.text === 'state check')?.msgid]);

    const read = textOf(await mcp.callTool({ name: 'read_messages', arguments: { channel: '#agents', limit: 3 } }));
    const lines = read.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^\[\d{2}:\d{2}:\d{2}\] <ada> state check$/);
    expect(lines[1]).toMatch(/^\[\d{2}:\d{2}:\d{2}\] <bob> hi ada, bob here$/);
    expect(lines[2]).toMatch(/^\[\d{2}:\d{2}:\d{2}\] <ada> hello from ada$/);
    // What eve says is read too (the observer reads everyone).
    await eve.conn.send('#agents', 'eve was here', {}, AbortSignal.timeout(5_000));
    await waitFor(async () => textOf(await mcp.callTool({ name: 'read_messages', arguments: { channel: '#agents', limit: 1 } })).endsWith('<eve> eve was here'), 'eve read back');
  });

  it('read_messages since an ISO 8601 time keeps only later lines, and refuses a bad one', async () => {
    const before = new Date(Date.now() - 1_000).toISOString();
    await mcp.callTool({ name: 'send_message', arguments: { channel: '#agents', text: 'after the mark', sender: 'ada' } });
    const r = await h.bridge.get(`/mcp/chat/messages?channel=${encodeURIComponent('#agents')}&since=${encodeURIComponent(before)}`);
    expect(r.status).toBe(200);
    await expectValidResponse('GET', '/mcp/chat/messages', 200, r.json);
    const texts = (r.json as { messages: { text: string }[] }).messages.map((m) => m.text);
    expect(texts).toContain('after the mark');
    expect(texts).not.toContain('hello from ada');
    const bad = await h.bridge.get(`/mcp/chat/messages?channel=${encodeURIComponent('#agents')}&since=yesterday`);
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ error: 'since must be an ISO 8601 time, e.g. 2026-11-30T09:00:00Z' });
  });

  it('a 1,200-byte message is split on UTF-8 boundaries, never cut by the server, and reassembles in order', async () => {
    // Multi-byte characters and emoji straddle every cut if the splitter counts characters.
    const unit = 'Grüße aus Zürich 👩‍💻 — ';
    let text = '';
    while (Buffer.byteLength(text + unit) <= 1_200) text += unit;
    text = text.padEnd(text.length + (1_200 - Buffer.byteLength(text)), 'x');
    expect(Buffer.byteLength(text)).toBe(1_200);
    const answer = textOf(await mcp.callTool({ name: 'send_message', arguments: { channel: '#agents', text, sender: 'ada' } }));
    expect(answer).toMatch(/in \d+ lines; the server confirmed it/);
    const expected = splitForIrc(text, ircLineBudget(512, 'ada', '#agents'));
    expect(expected.length).toBeGreaterThanOrEqual(3);
    await waitFor(() => eve.lines.filter((l) => l.deliveryTag?.endsWith(`/${expected.length}`) === true && l.nick === 'ada').length >= expected.length, 'every part at eve');
    const parts = eve.lines.filter((l) => l.nick === 'ada' && expected.includes(l.text));
    expect(parts.map((l) => l.text)).toEqual(expected);
    expect(parts.map((l) => l.text).join('')).toBe(text);
    for (const p of parts) expect(Buffer.byteLength(`:ada!~ada@127.0.0.1 PRIVMSG #agents :${p.text}\r\n`)).toBeLessThanOrEqual(512);
  });

  it('get_members lists the agents and people, never Herald\'s observer; bad names get a clear 400', async () => {
    const members = textOf(await mcp.callTool({ name: 'get_members', arguments: { channel: '#agents' } }));
    expect(members.split('\n')).toEqual(expect.arrayContaining(['- ada', '- bob', '- eve']));
    expect(members).not.toContain('herald');
    const res = await h.bridge.get(`/mcp/chat/members?channel=${encodeURIComponent('#agents')}`);
    await expectValidResponse('GET', '/mcp/chat/members', 200, res.json);
    const badNick = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'x', sender: '9lives' });
    expect(badNick.status).toBe(400);
    expect((badNick.json as { error: string }).error).toContain('sender must be an IRC nick');
    const observerNick = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'x', sender: 'Herald' });
    expect(observerNick.status).toBe(400);
    const badChannel = await h.bridge.post('/mcp/chat/messages', { channel: '#a b', text: 'x', sender: 'ada' });
    expect(badChannel.status).toBe(400);
  });

  it('a nick someone else holds is refused for good, not retried forever', async () => {
    const send = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'impostor', sender: 'eve' });
    const id = (send.json as { id: string }).id;
    const r = await waitFor(async () => {
      const s = (await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string; reason?: string };
      return s.state !== 'pending' ? s : undefined;
    }, 'the send to settle');
    expect(r).toMatchObject({ state: 'failed', reason: 'the nick eve is in use on the IRC server' });
    expect(eve.lines.some((l) => l.text === 'impostor')).toBe(false);
  });

  it('create_channel creates a channel the observer keeps; list_channels shows it', async () => {
    expect(textOf(await mcp.callTool({ name: 'create_channel', arguments: { name: 'newroom' } }))).toBe('Channel #newroom is ready on irc.');
    const listed = textOf(await mcp.callTool({ name: 'list_channels', arguments: {} }));
    expect(listed.split('\n')).toEqual(expect.arrayContaining(['- #agents', '- #newroom']));
    expect(textOf(await mcp.callTool({ name: 'get_members', arguments: { channel: '#newroom' } }))).toBe('No one in #newroom.');
    const res = await h.bridge.get('/mcp/chat/channels');
    await expectValidResponse('GET', '/mcp/chat/channels', 200, res.json);
  });

  it('a destination mapped to an IRC channel: a protocol post goes there once, under Herald\'s nick', async () => {
    await eve.conn.join('#alerts');
    const put = await h.admin.put(`/admin/destinations/${IDS.guild}/ops`, { irc_channel: '#alerts' });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({ guild_id: IDS.guild, destination: 'ops', irc_channel: '#alerts' });
    await expectValidResponse('PUT', '/admin/destinations/{guild_id}/{destination}', 200, put.json);
    const requestId = newRequestId();
    const accepted = await h.bridge.post('/mcp/deliveries', post(requestId, 'disk almost full', 'ops'));
    expect(accepted.status).toBe(202);
    const done = await h.waitForState(requestId, 'delivered');
    await expectValidResponse('GET', '/mcp/deliveries/{request_id}', 200, done);
    expect(String(done['url'])).toMatch(new RegExp(`^irc://127\\.0\\.0\\.1:${ircd.port}/%23alerts\\?msgid=`));
    await waitFor(() => eve.lines.some((l) => l.text === 'disk almost full'), 'eve to see the post');
    expect(eve.lines.filter((l) => l.text === 'disk almost full').map((l) => [l.channel, l.nick])).toEqual([['#alerts', 'herald']]);
    // The same request again: the stored delivery, nothing more sent.
    expect((await h.bridge.post('/mcp/deliveries', post(requestId, 'disk almost full', 'ops'))).json).toMatchObject({ existing: true });
    const mappings = await h.admin.get(`/admin/destinations/${IDS.guild}`);
    await expectValidResponse('GET', '/admin/destinations/{guild_id}', 200, mappings.json);
    expect((mappings.json as { destinations: Record<string, unknown>[] }).destinations.find((d) => d['destination'] === 'ops')).toMatchObject({ mapped: true, irc_channel: '#alerts' });
    const bad = await h.admin.put(`/admin/destinations/${IDS.guild}/ops`, { irc_channel: 'alerts' });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ error: 'irc_channel must be an IRC channel name such as #alerts' });
    expect(eve.lines.filter((l) => l.text === 'disk almost full')).toHaveLength(1);
  });

  it('a destination set as {transport: irc, channel}: answered as irc_channel, the name normalised; IRC says what a channel name is', async () => {
    const put = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'irc', channel: '#Digest' });
    expect([put.status, put.text]).toEqual([200, `{"guild_id":"${IDS.guild}","destination":"digest","irc_channel":"#digest"}`]);
    const mappings = (await h.admin.get(`/admin/destinations/${IDS.guild}`)).json as { destinations: Record<string, unknown>[] };
    expect(mappings.destinations.find((d) => d['destination'] === 'digest')).toMatchObject({ mapped: true, irc_channel: '#digest' });
    // Discord's channels too, beside IRC: still answered as channel_id.
    const discord = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'discord', channel: IDS.channels.digest });
    expect(discord.json).toEqual({ guild_id: IDS.guild, destination: 'digest', channel_id: IDS.channels.digest });
    for (const [body, reason] of [
      [{ transport: 'irc', channel: '#a b' }, 'channel must be an IRC channel name (#name: no spaces, commas or colons, at most 50 characters)'],
      [{ transport: 'memory', channel: '#digest' }, 'transport must be one of discord, irc (the platforms this Herald runs)'],
      // The old field keeps its own reason, for what only IRC refuses (a control character).
      [{ irc_channel: '#a\u0001b' }, 'irc_channel must be an IRC channel name such as #alerts'],
      [{ irc_channel: '#digest', transport: 'irc', channel: '#digest' }, 'give one of channel_id, irc_channel, or transport with channel'],
    ] as const) {
      const res = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, body);
      expect([res.status, res.json], JSON.stringify(body)).toEqual([400, { error: reason }]);
    }
  });

  it('agent text reaches IRC without control characters: a CTCP request is refused at the send, formatting goes through, a protocol post is cleaned', async () => {
    const ctcp = '\u0001DCC SEND evil.exe 2130706433 4444 1024\u0001';
    const refused = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: ctcp, sender: 'ada' });
    expect(refused.status).toBe(400);
    expect((refused.json as { error: string }).error).toMatch(/^text must not contain control characters other than IRC formatting .*: U\+0001 at character 1$/);
    // Bell, a terminal escape, backspace, DEL, a C1 control: each refused, naming the character.
    for (const [text, code] of [['ding\u0007', '0007'], ['\u001b[2Jcleared', '001B'], ['ab\bc', '0008'], ['x\u007f', '007F'], ['x\u0085y', '0085']]) {
      const res = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text, sender: 'ada' });
      const at = [...(text ?? '')].findIndex((c) => c.charCodeAt(0) === parseInt(code ?? '', 16)) + 1;
      expect([res.status, (res.json as { error: string }).error.endsWith(`U+${code} at character ${at}`)]).toEqual([400, true]);
    }
    // IRC's formatting codes (and a tab) are text: they reach the channel byte for byte.
    const styled = '\u0002bold\u0002 \u000304red\u0003 \u001ditalic\u001d \u001funder\u001f \u001estrike\u001e \u0011mono\u0011 \u0016rev\u0016 \u0004ff0000hex\u0004\u000f plain\tafter a tab';
    const sent = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: styled, sender: 'ada' });
    expect(sent.status).toBe(202);
    await waitFor(() => eve.lines.some((l) => l.text === styled && l.nick === 'ada'), 'eve to see the formatted line as sent');
    // A protocol post is the protocol's to accept (on Discord \x01 is harmless); on an IRC
    // destination its control characters are dropped on the way out, never sent as a CTCP request.
    await eve.conn.join('#ctcp');
    expect((await h.admin.put(`/admin/destinations/${IDS.guild}/deals`, { irc_channel: '#ctcp' })).status).toBe(200);
    const requestId = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(requestId, `${ctcp} \u0002deal\u0002 of the day`, 'deals'))).status).toBe(202);
    await h.waitForState(requestId, 'delivered');
    const clean = 'DCC SEND evil.exe 2130706433 4444 1024 \u0002deal\u0002 of the day';
    await waitFor(() => eve.lines.some((l) => l.channel === '#ctcp' && l.text === clean), 'eve to see the post without \\x01');
    expect(eve.lines.filter((l) => l.text.includes('\u0001'))).toEqual([]);
  });

  it('/readyz and metrics cover the IRC link', async () => {
    const ready = await h.bridge.get('/readyz');
    expect((ready.json as { checks: Record<string, string> }).checks['irc']).toBe('ok');
    const metrics = await (await fetch(`${h.herald.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/herald_irc_lines_sent_total\{link="sender"\} [1-9]/);
    expect(metrics).toMatch(/herald_irc_echoes_confirmed_total\{link="sender"\} [1-9]/);
    expect(metrics).toContain('herald_transport_link_up{transport="irc",link="observer"} 1');
  });

  it('the IRC server killed and restarted: Herald reconnects, rejoins, and nothing in the outbox is lost', async () => {
    await eve.conn.close();
    await ircd.stop();
    await waitFor(async () => ((await h.bridge.get('/readyz')).json as { checks: Record<string, string> }).checks['irc'] === 'unavailable', 'readyz to see the link down');
    const send = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'sent while the server was down', sender: 'ada' });
    expect(send.status).toBe(202);
    const id = (send.json as { id: string }).id;
    await ircd.start();
    eve = await witness(ircd, 'eve', ['#agents']);
    await waitFor(async () => ((await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string }).state === 'delivered', 'the send to go out after the restart', 45_000);
    await waitFor(() => eve.lines.some((l) => l.text === 'sent while the server was down'), 'eve to see it');
    expect(eve.lines.filter((l) => l.text === 'sent while the server was down')).toHaveLength(1);
    await waitFor(async () => ((await h.bridge.get('/readyz')).json as { checks: Record<string, string> }).checks['irc'] === 'ok', 'readyz ok again');
    const metrics = await (await fetch(`${h.herald.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/herald_irc_reconnects_total\{link="observer"\} [1-9]/);
  }, 90_000);

  it('Herald restarted mid-send: lines an earlier process got out are found in the channel, not sent again', async () => {
    // A process took this send, got two of its three lines out under ada2's nick, and died before
    // recording anything. Its lease has expired. A new Herald re-drives it.
    const id = 'c0ffee'.padEnd(32, '0');
    const text = 'part '.repeat(240).trim();
    // A line said in the channel well before the send was stored: the new observer's replay reaches
    // back past the send (beyond the clocks' allowed skew, 5 s), so its record holds the whole send.
    await eve.conn.send('#agents', 'a line before the send', {}, AbortSignal.timeout(5_000));
    const lineBefore = Date.now();
    const past = await waitFor(() => Date.now() - lineBefore > 6_000 && new Date(), 'the send to be stored well after that line', 10_000);
    const parts = splitForIrc(text, ircLineBudget(512, 'ada2', '#agents'));
    expect(parts).toHaveLength(3);
    const dead = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick: 'ada2', log, linesPerSecond: 100, echoTimeoutMs: 5_000 });
    await dead.connect();
    await dead.join('#agents');
    for (const i of [0, 1]) await dead.send('#agents', parts[i] ?? '', { [DELIVERY_TAG]: `${id}:${i}/3` }, AbortSignal.timeout(5_000));
    await dead.close();
    // The first Herald stops; while no Herald runs, the send is left in flight under the dead
    // worker's expired lease, and what the first observer stored of it is forgotten: only the
    // channel (its history replay on JOIN) can tell the new process which parts went out.
    const db = h.db;
    await h.herald.close();
    const store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    try {
      // A chat send is a row of the deliveries outbox (kind chat, request_id chat:<id>).
      const target = { transport: 'irc', channel: '#agents', sender: 'ada2' };
      const body = { content: text };
      await sql`insert into deliveries (request_id, kind, target, body, payload_hash, status, attempts, created_at, next_attempt_at, attempt_started_at, lease_owner, lease_expires_at)
                values (${`chat:${id}`}, 'chat', ${JSON.stringify(target)}, ${JSON.stringify(body)}, ${payloadHash({ kind: 'chat', target, body })}, 'in_flight', 1, ${past}, ${past}, ${past}, 'dead-worker', ${past})`.execute(store.db);
      await sql`delete from irc_lines where starts_with(delivery_tag, ${id})`.execute(store.db);
    } finally {
      await store.close();
    }
    h = await startTestHerald({ env: ircEnv(), useDb: db, useSandbox: h.sandbox });
    const done = await waitFor(async () => {
      const s = (await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string; message_ids?: string[] };
      return s.state !== 'pending' ? s : undefined;
    }, 'the re-driven send to settle', 30_000);
    expect(done.state).toBe('delivered');
    expect(done.message_ids).toHaveLength(3);
    await waitFor(() => eve.lines.filter((l) => parts.includes(l.text)).length >= 3, 'eve to see all three parts');
    // Each part exactly once, in order: the third from the new process, the first two never again.
    expect(eve.lines.filter((l) => parts.includes(l.text)).map((l) => l.text)).toEqual(parts);
  }, 90_000);
});

describe.skipIf(skip !== undefined)('IRC on a server without labeled-response: honest about what it cannot prove', () => {
  let ircd: Ircd;
  let h: TestHerald;
  let eve: { conn: IrcConnection; lines: ChannelLine[] };

  beforeAll(async () => {
    ircd = await startIrcd({ without: ['ircv3_labeledresponse'] });
    h = await startTestHerald({ env: { HERALD_IRC_URL: ircd.url, HERALD_IRC_CHANNELS: '#agents', HERALD_IRC_LINES_PER_SECOND: '50' } });
    eve = await witness(ircd, 'eve', ['#agents', '#alerts']);
  });
  afterAll(async () => {
    await eve?.conn.close();
    await h?.close();
    await ircd?.dispose();
  });

  it('a chat send is written once and reported unconfirmed, never delivered', async () => {
    const send = await h.bridge.post('/mcp/chat/messages', { channel: '#agents', text: 'no proof', sender: 'ada' });
    const id = (send.json as { id: string }).id;
    const s = await waitFor(async () => {
      const r = (await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string; reason?: string };
      return r.state !== 'pending' ? r : undefined;
    }, 'the send to settle');
    expect(s.state).toBe('unconfirmed');
    expect(s.reason).toContain('no proof');
    await expectValidResponse('GET', '/mcp/chat/messages/{id}', 200, s);
    await waitFor(() => eve.lines.some((l) => l.text === 'no proof'), 'eve to see it');
    expect(eve.lines.filter((l) => l.text === 'no proof')).toHaveLength(1);
  });

  it('a protocol post to an IRC destination ends unknown (unconfirmed), not delivered', async () => {
    expect((await h.admin.put(`/admin/destinations/${IDS.guild}/alerts`, { irc_channel: '#alerts' })).status).toBe(200);
    const requestId = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(requestId, 'unproven alert'))).status).toBe(202);
    const state = await h.waitForState(requestId, 'unknown');
    await expectValidResponse('GET', '/mcp/deliveries/{request_id}', 200, state);
    const detail = await h.admin.get(`/admin/deliveries/${requestId}`);
    expect(String((detail.json as { reason?: string }).reason)).toContain('unconfirmed');
    await waitFor(() => eve.lines.some((l) => l.text === 'unproven alert'), 'eve to see it');
    expect(eve.lines.filter((l) => l.text === 'unproven alert')).toHaveLength(1);
  });
});
