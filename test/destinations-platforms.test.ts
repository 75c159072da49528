import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destinationOperations } from '../src/modules/destinations/destination.http.js';
import { DestinationService } from '../src/modules/destinations/destination.service.js';
import type { Store } from '../src/infra/db/database.js';
import { createApi } from '../src/infra/http/api.js';
import type { Database } from '../src/schema.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import type { TransportName } from '../src/platforms/platform.js';
import { call, contractApi } from './support/client.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DestinationsDb } from '../src/modules/destinations/destination.table.js';

const PUT = (guild: string, destination: string) => `/admin/destinations/${guild}/${destination}`;

describe('destinations as {transport, channel}, on Herald with Discord as its home platform', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('maps a Discord channel given as {transport, channel}: the answer and the listings are channel_id\'s, byte for byte', async () => {
    const put = await h.admin.put(PUT(IDS.guild, 'alerts'), { transport: 'discord', channel: IDS.channels.alerts });
    expect(put.status).toBe(200);
    expect(put.text).toBe(`{"guild_id":"${IDS.guild}","destination":"alerts","channel_id":"${IDS.channels.alerts}"}`);
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [{ guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.alerts }] });
    const guild = (await h.admin.get(`/admin/destinations/${IDS.guild}`)).json as { destinations: Record<string, unknown>[] };
    expect(guild.destinations.find((d) => d['destination'] === 'alerts')).toEqual({ destination: 'alerts', description: expect.any(String) as string, mapped: true, channel_id: IDS.channels.alerts });
  });

  it('asks Discord as channel_id does: another guild and a voice channel are 422, Discord down is 502', async () => {
    for (const [channel, reason] of [
      [IDS.otherChannel, 'channel belongs to another guild'],
      [IDS.voiceChannel, 'channel is not a text channel'],
      ['999999999999999999', 'channel not found or not visible to the bot'],
    ] as const) {
      const res = await h.admin.put(PUT(IDS.guild, 'deals'), { transport: 'discord', channel });
      expect([res.status, res.text]).toEqual([422, JSON.stringify({ error: reason })]);
    }
    h.sandbox.inject({ method: 'GET', path: '^/channels/', action: 'error', status: 503, times: 10 });
    const down = await h.admin.put(PUT(IDS.guild, 'deals'), { transport: 'discord', channel: IDS.channels.deals });
    h.sandbox.clearFaults();
    expect([down.status, down.text]).toEqual([502, '{"error":"discord unavailable"}']);
  });

  it('refuses bad input with a 400 naming the field, and maps nothing', async () => {
    const cases: [unknown, string][] = [
      [{ transport: 'discord' }, 'transport and channel go together: give both'],
      [{ channel: IDS.channels.alerts }, 'transport and channel go together: give both'],
      [{ transport: 'irc', channel: '#alerts' }, 'transport must be one of discord (the platforms this Herald runs)'],
      [{ transport: 'Discord', channel: IDS.channels.alerts }, 'transport must be a platform name such as discord or irc'],
      [{ transport: 'discord', channel: '' }, 'channel must be 1..100 characters'],
      [{ transport: 'discord', channel: 'c'.repeat(101) }, 'channel must be 1..100 characters'],
      // Only ids are looked up: nothing else becomes part of a Discord API path.
      [{ transport: 'discord', channel: '../users/@me' }, 'channel must be a Discord channel id (a snowflake)'],
      [{ transport: 'discord', channel: 'alerts' }, 'channel must be a Discord channel id (a snowflake)'],
      [{ transport: 'discord', channel: 'a\u0000b' }, 'channel must not contain NUL (U+0000)'],
      [{ channel_id: IDS.channels.alerts, irc_channel: '#alerts' }, 'give channel_id or irc_channel, not both'],
      [{ channel_id: IDS.channels.alerts, transport: 'discord', channel: IDS.channels.alerts }, 'give one of channel_id, irc_channel, or transport with channel'],
      [{ irc_channel: '#alerts' }, 'irc_channel needs IRC (HERALD_IRC_URL is not set)'],
      [{}, 'channel_id must be a snowflake'],
    ];
    for (const [body, reason] of cases) {
      const res = await h.admin.put(PUT(IDS.guild, 'digest'), body);
      expect([res.status, res.text], JSON.stringify(body)).toEqual([400, JSON.stringify({ error: reason })]);
    }
    expect(((await h.admin.get(`/admin/destinations/${IDS.guild}`)).json as { destinations: { destination: string; mapped: boolean }[] }).destinations.find((d) => d.destination === 'digest')?.mapped).toBe(false);
  });
});

/**
 * A platform other than the home one and IRC, through the real API middleware and the
 * destinations handlers: its mappings answer `{transport, channel}`. (Every other operation of the
 * contract is bound to a stub: the API refuses to start with an operation unbound.)
 */
describe('destinations on a third platform', () => {
  let fixture: MigratedStore | undefined;
  let store: Store<Database>;
  let server: Server;
  let url: string;
  const adminToken = newToken();
  const guild = '234567890123456789';
  const home = new MemoryPlatform({ now: () => new Date() }).addChannel('345678901234567890', { guildId: guild, name: 'alerts' });
  const rooms = new MemoryPlatform({ now: () => new Date() })
    .addChannel('!ops:example.org', { name: 'ops' })
    .addChannel('!lobby:example.org', { name: 'lobby', isText: false });
  const matrix = 'matrix' as TransportName;

  beforeAll(async () => {
    fixture = await migratedStore();
    ({ store } = fixture);
    const destinations = new DestinationService(
      tablesOf<DestinationsDb>(store.db),
      {
        home: { name: home.name, channels: home.channels },
        others: [{ name: matrix, channels: rooms.channels, checkChannel: (c) => (/^![^\s:]+:\S+$/.test(c) ? undefined : 'channel must be a room id such as !ops:example.org') }],
      },
      { now: () => new Date() },
    );
    const own = destinationOperations(destinations);
    const others = (await contractApi()).getOperations().flatMap((op) => (op.operationId !== undefined ? [op.operationId] : []));
    const middleware = await createApi({
      bridgeToken: undefined,
      adminToken,
      log: pino({ level: 'silent' }),
      operations: [own, (kit) => Object.fromEntries(others.filter((id) => !(id in own(kit))).map((id) => [id, () => ({ status: 500, body: { error: 'not in this test' } })]))],
    });
    const app = new Koa();
    app.use(middleware);
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await fixture?.close();
  });

  const admin = (method: string, path: string, body?: unknown) => call(url, method, path, { token: adminToken, body });

  it('maps a room as {transport, channel} and answers it in that form, everywhere', async () => {
    const put = await admin('PUT', PUT(guild, 'ops'), { transport: 'matrix', channel: '!ops:example.org' });
    expect([put.status, put.text]).toEqual([200, `{"guild_id":"${guild}","destination":"ops","transport":"matrix","channel":"!ops:example.org"}`]);
    await admin('PUT', PUT(guild, 'alerts'), { channel_id: '345678901234567890' });
    expect((await admin('GET', '/admin/destinations')).json).toEqual({
      items: [
        { guild_id: guild, destination: 'alerts', channel_id: '345678901234567890' },
        { guild_id: guild, destination: 'ops', transport: 'matrix', channel: '!ops:example.org' },
      ],
    });
    const mine = (await admin('GET', `/admin/destinations/${guild}`)).json as { destinations: Record<string, unknown>[] };
    expect(mine.destinations.find((d) => d['destination'] === 'ops')).toEqual({ destination: 'ops', description: expect.any(String) as string, mapped: true, transport: 'matrix', channel: '!ops:example.org' });
    // Stored as any mapping is: (transport, channel_id).
    expect(await store.db.selectFrom('destinations').select(['transport', 'channel_id']).where('destination', '=', 'ops').executeTakeFirst()).toEqual({ transport: 'matrix', channel_id: '!ops:example.org' });
  });

  it('the platform says what a channel name is (400) and which channels it shows (422); its outage is a 502 naming it', async () => {
    const bad = await admin('PUT', PUT(guild, 'deals'), { transport: 'matrix', channel: 'ops' });
    expect([bad.status, bad.text]).toEqual([400, '{"error":"channel must be a room id such as !ops:example.org"}']);
    const unknown = await admin('PUT', PUT(guild, 'deals'), { transport: 'matrix', channel: '!nope:example.org' });
    expect([unknown.status, unknown.text]).toEqual([422, '{"error":"channel not found or not visible to the bot"}']);
    const voice = await admin('PUT', PUT(guild, 'deals'), { transport: 'matrix', channel: '!lobby:example.org' });
    expect([voice.status, voice.text]).toEqual([422, '{"error":"channel is not a text channel"}']);
    // Not the home platform: its channels are not in the mapping's guild, and need not be.
    expect((await admin('PUT', PUT(guild, 'deals'), { transport: 'matrix', channel: '!ops:example.org' })).status).toBe(200);
    rooms.inject({ op: 'getChannel', failure: { kind: 'transient', detail: 'down' } });
    const down = await admin('PUT', PUT(guild, 'digest'), { transport: 'matrix', channel: '!ops:example.org' });
    expect([down.status, down.text]).toEqual([502, '{"error":"matrix unavailable"}']);
    const noIrc = await admin('PUT', PUT(guild, 'digest'), { transport: 'irc', channel: '#ops' });
    expect([noIrc.status, noIrc.text]).toEqual([400, '{"error":"transport must be one of memory, matrix (the platforms this Herald runs)"}']);
  });
});
