import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboxMetrics } from '../src/modules/inbox/inbox.metrics.js';
import { inboxScope, type ScopePorts } from '../src/modules/inbox/inbox.scope.js';
import { InboxService } from '../src/modules/inbox/inbox.service.js';
import type { InboxDb } from '../src/modules/inbox/inbox.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { parsePolicy } from '../src/infra/policy/policy.js';
import type { InboundMessage } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { TestClock } from './support/herald.js';

/**
 * Who hears what, on the service (PGlite, or PostgreSQL with TEST_DATABASE_URL): a mention is
 * stored only where a destination maps the channel (or the thread's channel); a person who
 * unregisters leaves nothing of their DM behind (messages and reactions), and what they do there
 * later is not stored; each reader (the connector, each OAuth client) has its own cursor and sees
 * what its policy allows, DMs only where it is the connector or was granted a DM tool.
 */

const SELF = '111111111111111111';
const PERSON = '123456789012345678';
const HERALDS = '900000000000000001';
const TOOLS = ['send_dm', 'post_message', 'list_inbox', 'wait_for_messages', 'ack_inbox', 'get_capabilities'];

/** Channels: `alerts-ch` maps alerts, `ops-ch` maps ops, `stray` maps nothing; `t-ops` is a thread under ops-ch. */
const ports: ScopePorts = {
  destinationsByChannel: async () => new Map([['alerts-ch', new Set(['alerts'])], ['ops-ch', new Set(['ops'])]]),
  parentOf: async (id) => (id === 't-ops' ? 'ops-ch' : undefined),
};

let fixture: MigratedStore;
let inbox: InboxService;
const registered = new Set([PERSON]);

beforeAll(async () => {
  fixture = await migratedStore();
  inbox = new InboxService(
    tablesOf<InboxDb>(fixture.store.db),
    { ...ports, selfId: async () => SELF, ownBots: async () => new Set([SELF]), isRegistered: async (id) => registered.has(id), sentByHerald: async (ids) => new Set(ids.filter((id) => id === HERALDS)), listened: async () => new Set(), handoffClaims: () => false },
    new TestClock(),
    { platform: 'discord', push: false, pushIdentity: 'default', publish: () => undefined, ring: () => undefined, log: pino({ level: 'silent' }), metrics: new InboxMetrics(new Registry()), waitPollMs: 50 },
  );
}, 90_000);
afterAll(() => fixture?.close());

let next = 5000;
const message = (channelId: string, content: string, o: { dm?: boolean; thread?: boolean; author?: string } = {}): InboundMessage => ({
  channelId,
  messageId: String(next++),
  authorId: o.author ?? PERSON,
  authorIsBot: false,
  guildId: o.dm === true ? undefined : 'g1',
  content,
  createdAt: new Date(),
  heard: { authorName: null, mentions: content.includes('@bot') ? [SELF] : [], threadId: o.thread === true ? channelId : null, replyTo: null, attachments: [] },
});
const connector = inboxScope(undefined, undefined, ports);
const all = async (scope = connector) => (await inbox.list(scope, '0', 100)).items;

describe('who hears what', () => {
  it('a mention is stored where a destination maps the channel or the thread\'s channel, never in a channel nobody mapped', async () => {
    const mapped = message('alerts-ch', 'hey @bot');
    const thread = message('t-ops', 'in a thread @bot', { thread: true });
    const stray = message('stray', 'over here @bot');
    for (const m of [mapped, thread, stray]) await inbox.hear(m, 'live');
    const ids = (await all()).map((e) => e.message_id);
    expect(ids).toEqual(expect.arrayContaining([mapped.messageId, thread.messageId]));
    expect(ids).not.toContain(stray.messageId);
  });

  it('unregistering deletes the person\'s DM messages and their reactions there; later ones are not stored', async () => {
    const dm = message('dm-ch', 'a DM', { dm: true });
    await inbox.hear(dm, 'live');
    await inbox.react({ channelId: 'dm-ch', guildId: undefined, messageId: HERALDS, userId: PERSON, emoji: '👍' });
    // A reaction in a guild channel is not the DM's.
    await inbox.react({ channelId: 'alerts-ch', guildId: 'g1', messageId: HERALDS, userId: PERSON, emoji: '🎉' });
    expect((await all()).filter((e) => e.author.id === PERSON && e.guild_id === null).map((e) => e.kind).sort()).toEqual(['dm', 'reaction']);

    registered.delete(PERSON);
    await inbox.forget(PERSON);
    expect((await all()).filter((e) => e.author.id === PERSON && e.guild_id === null)).toEqual([]);
    await inbox.hear(message('dm-ch', 'after unregistering', { dm: true }), 'live');
    await inbox.react({ channelId: 'dm-ch', guildId: undefined, messageId: HERALDS, userId: PERSON, emoji: '👀' });
    expect((await all()).filter((e) => e.author.id === PERSON && e.guild_id === null)).toEqual([]);
    expect((await all()).some((e) => e.reaction === '🎉')).toBe(true);
    registered.add(PERSON);
  });

  it('each reader has its own cursor and sees what its policy allows: DMs only for the connector or a client granted send_dm', async () => {
    const policy = parsePolicy(
      ['clients:', '  reader: { read_only: true }', '  alerts-only: { destinations: [alerts] }', '  dm-helper: { tools: [send_dm, list_inbox, wait_for_messages, ack_inbox] }', '  irc-only: { platforms: [irc] }'].join('\n'),
      'policy.yaml',
      { tools: TOOLS, platforms: ['discord', 'irc', 'memory'] },
    );
    const scope = (client: string | undefined) => inboxScope(policy, client, ports);
    const dm = message('dm-ch', 'private', { dm: true });
    const alerts = message('alerts-ch', 'alert @bot');
    const ops = message('t-ops', 'ops thread @bot', { thread: true });
    for (const m of [dm, alerts, ops]) await inbox.hear(m, 'live');
    const seen = async (client: string | undefined) => new Set((await all(scope(client))).map((e) => e.message_id));

    const c = await seen(undefined);
    expect([c.has(dm.messageId), c.has(alerts.messageId), c.has(ops.messageId)]).toEqual([true, true, true]);
    const reader = await seen('reader');
    expect([reader.has(dm.messageId), reader.has(alerts.messageId), reader.has(ops.messageId)]).toEqual([false, true, true]);
    const unlisted = await seen('someone-else');
    expect([unlisted.has(dm.messageId), unlisted.has(alerts.messageId)]).toEqual([false, true]);
    const alertsOnly = await seen('alerts-only');
    expect([alertsOnly.has(dm.messageId), alertsOnly.has(alerts.messageId), alertsOnly.has(ops.messageId)]).toEqual([false, true, false]);
    const helper = await seen('dm-helper');
    expect(helper.has(dm.messageId)).toBe(true);
    expect((await seen('irc-only')).size).toBe(0);

    // Acks: each moves its own cursor; the connector's stays.
    const newest = (await all()).at(-1)?.id ?? '0';
    expect(await inbox.ack(scope('reader'), newest)).toBe(newest);
    expect((await inbox.list(scope('reader'), undefined, 10)).items).toEqual([]);
    expect((await inbox.list(scope('reader'), undefined, 10)).cursor).toBe(newest);
    expect((await inbox.list(scope(undefined), undefined, 10)).cursor).toBe('0');
    expect((await inbox.list(scope('alerts-only'), undefined, 10)).cursor).toBe('0');

    // A wait sees only what the reader may see: the alerts-only client waits past the DM and the ops thread.
    const waited = await inbox.next(scope('alerts-only'), (await all()).find((e) => e.message_id === alerts.messageId)?.id, 0);
    expect(waited).toBeNull();
  });

  it('a page of a filtered reader fills from past what it may not see', async () => {
    for (let i = 0; i < 230; i++) await inbox.hear(message('ops-ch', `ops ${i} @bot`), 'live');
    const last = message('alerts-ch', 'after the flood @bot');
    await inbox.hear(last, 'live');
    const policy = parsePolicy('clients:\n  alerts-only: { destinations: [alerts] }\n', 'policy.yaml', { tools: TOOLS, platforms: ['discord'] });
    const page = await inbox.list(inboxScope(policy, 'alerts-only', ports), '0', 100);
    expect(page.items.map((e) => e.message_id)).toContain(last.messageId);
    expect(page.items.every((e) => e.channel_id === 'alerts-ch')).toBe(true);
  }, 60_000);
});
