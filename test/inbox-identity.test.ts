import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboxMetrics } from '../src/modules/inbox/inbox.metrics.js';
import { ownBotIds } from '../src/modules/inbox/inbox.module.js';
import { inboxScope, type ScopePorts } from '../src/modules/inbox/inbox.scope.js';
import { InboxService } from '../src/modules/inbox/inbox.service.js';
import type { InboxDb } from '../src/modules/inbox/inbox.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { parsePolicy } from '../src/infra/policy/policy.js';
import type { InboundMessage } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { TestClock } from './support/herald.js';

/**
 * The inbox per bot, on the service: what another bot's session hears (the DMs written to it by
 * people registered with it, their reactions there; nothing said in channels), which reader sees
 * it, what the connector's webhook is pushed, and what an unregister and the prune forget.
 */

const SELF = '111111111111111111';
const OPS_SELF = '111111111111111112';
const PERSON = '123456789012345678';
const TOOLS = ['send_dm', 'list_inbox', 'wait_for_messages', 'ack_inbox'];

const ports: ScopePorts = { destinationsByChannel: async () => new Map([['alerts-ch', new Set(['alerts'])]]), parentOf: async () => undefined };

let fixture: MigratedStore;
let inbox: InboxService;
/** Who is registered with which bot: `<identity>:<user id>`. */
const registered = new Set([`default:${PERSON}`, `ops:${PERSON}`]);
/** While set, the next registration check's answer waits on it (an unregister commits meanwhile). */
let gate: Promise<void> | undefined;

beforeAll(async () => {
  fixture = await migratedStore();
  inbox = new InboxService(
    tablesOf<InboxDb>(fixture.store.db),
    {
      ...ports,
      selfId: async (identity) => (identity === 'ops' ? OPS_SELF : SELF),
      ownBots: async () => new Set([SELF, OPS_SELF]),
      isRegistered: async (id, identity) => {
        // Read now; answered once the gate opens (the answer travelling back while things change).
        const now = registered.has(`${identity}:${id}`);
        const held = gate;
        gate = undefined;
        if (held !== undefined) await held;
        return now;
      },
      sentByHerald: async (ids) => new Set(ids.filter((id) => id.startsWith('9'))),
      listened: async () => new Set(['alerts-ch']),
      handoffClaims: () => false,
    },
    new TestClock(),
    { platform: 'discord', push: true, pushIdentity: 'default', publish: () => undefined, ring: () => undefined, log: pino({ level: 'silent' }), metrics: new InboxMetrics(new Registry()), waitPollMs: 50 },
  );
}, 90_000);
afterAll(() => fixture?.close());

let next = 5000;
const message = (channelId: string, content: string, dm: boolean, mentions: string[] = []): InboundMessage => ({
  channelId,
  messageId: String(next++),
  authorId: PERSON,
  authorIsBot: false,
  guildId: dm ? undefined : 'g1',
  content,
  createdAt: new Date(),
  heard: { authorName: null, mentions, threadId: null, replyTo: null, attachments: [] },
});
const policy = parsePolicy(`clients:\n  agent-ops: { identity: ops, tools: [${TOOLS.join(', ')}] }\n  agent-main: { tools: [${TOOLS.join(', ')}] }\n`, 'policy.yaml', { tools: TOOLS, platforms: ['discord'], identities: ['ops'] });
const scopeOf = (client: string | undefined) => inboxScope(policy, client, ports);
const contents = async (client: string | undefined) => (await inbox.list(scopeOf(client), '0', 100)).items.map((e) => e.content || `${e.kind}:${e.reaction ?? ''}`);
const pushed = async () => (await fixture.store.db.selectFrom('inbox_pushes' as never).select('id' as never).execute()).length;

describe('the inbox per bot, on the service', () => {
  it("stores another bot's DMs as its own, and none of what it hears in channels", async () => {
    expect(await inbox.hear(message('ops-dm', 'to ops', true), 'live', 'ops')).toBe(true);
    // A listened channel's message heard by the ops bot's session: the default bot's to hear.
    expect(await inbox.hear(message('alerts-ch', 'in a listened channel, via ops', false), 'live', 'ops')).toBe(true);
    await inbox.hear(message('main-dm', 'to main', true), 'live');
    await inbox.hear(message('alerts-ch', 'in a listened channel', false), 'live');
    await inbox.react({ channelId: 'ops-dm', guildId: undefined, messageId: '9001', userId: PERSON, emoji: '👍' }, 'ops');
    // A reaction in a guild channel heard by the ops bot's session: not its to keep.
    await inbox.react({ channelId: 'alerts-ch', guildId: 'g1', messageId: '9002', userId: PERSON, emoji: '🎉' }, 'ops');

    expect(await contents('agent-ops')).toEqual(['to ops', 'in a listened channel', 'reaction:👍']);
    expect(await contents('agent-main')).toEqual(['to main', 'in a listened channel']);
    expect(await contents(undefined)).toEqual(['to main', 'in a listened channel']);
  });

  it("pushes the connector's webhook what the connector reads: never another bot's DMs", async () => {
    // to main, the listened channel's message; not "to ops" nor its reaction.
    expect(await pushed()).toBe(2);
  });

  it("hears a mention of another bot as that bot's, where a destination maps the channel: only its agents read it, and the webhook is not pushed it; the default bot's mentions are everyone's", async () => {
    const before = await pushed();
    // One message mentioning the ops bot, in a mapped (and listened) channel: both sessions hear it.
    const toOps = message('alerts-ch', 'ops, what broke?', false, [OPS_SELF]);
    await inbox.hear(toOps, 'live', 'ops');
    await inbox.hear(toOps, 'live');
    // Mentions of the ops bot where no destination maps the channel, and of Herald's own bot.
    await inbox.hear(message('stray-ch', 'ops, over here', false, [OPS_SELF]), 'live', 'ops');
    await inbox.hear(message('alerts-ch', 'main, what broke?', false, [SELF]), 'live');
    const seen = async (client: string | undefined) => (await inbox.list(scopeOf(client), '0', 100)).items.filter((e) => e.created_at !== '' && e.content.endsWith('?')).map((e) => `${e.kind}:${e.content}`);
    expect(await seen('agent-ops')).toEqual(['mention:ops, what broke?', 'message:ops, what broke?', 'mention:main, what broke?']);
    expect(await seen('agent-main')).toEqual(['message:ops, what broke?', 'mention:main, what broke?']);
    expect(await seen(undefined)).toEqual(['message:ops, what broke?', 'mention:main, what broke?']);
    const opsMention = (await inbox.list(scopeOf('agent-ops'), '0', 100)).items.find((e) => e.kind === 'mention');
    expect(opsMention?.event_id).toBe(`discord:${toOps.messageId}:mention:ops`);
    // The listened channel's copy and the default bot's mention are pushed; the ops bot's mention is not.
    expect((await pushed()) - before).toBe(2);
  });

  it("hears nothing Herald's own bots write, and leaves a handoff and a reply to Herald's message to the default bot", async () => {
    const before = (await inbox.list(scopeOf('agent-main'), '0', 100)).items.length;
    // The ops agent's post, mentioning Herald's bot, in a mapped and listened channel: heard by neither session.
    const fromOps = { ...message('alerts-ch', `<@${SELF}> restart the workers`, false, [SELF]), authorId: OPS_SELF };
    await inbox.hear(fromOps, 'live');
    await inbox.hear(fromOps, 'live', 'ops');
    // Herald's own bot mentioning the ops bot.
    await inbox.hear({ ...message('alerts-ch', `<@${OPS_SELF}> hello`, false, [OPS_SELF]), authorId: SELF }, 'live', 'ops');
    // A person's reply to Herald's message that pings the ops bot: the default bot's (kind reply), not an ops mention too.
    const reply = { ...message('alerts-ch', 'replying', false, [OPS_SELF]), heard: { authorName: null, mentions: [OPS_SELF], threadId: null, replyTo: '9003', attachments: [] } };
    await inbox.hear(reply, 'live', 'ops');
    await inbox.hear(reply, 'live');
    const added = (await inbox.list(scopeOf('agent-main'), '0', 100)).items.slice(before);
    expect(added.map((e) => `${e.kind}:${e.content}`)).toEqual(['reply:replying']);
    expect((await inbox.list(scopeOf('agent-ops'), '0', 100)).items.filter((e) => e.content === 'replying').map((e) => e.kind)).toEqual(['reply']);
  });

  it("does not store a DM to another bot from someone not registered with it", async () => {
    registered.delete(`ops:${PERSON}`);
    await inbox.hear(message('ops-dm', 'after unregistering from ops', true), 'live', 'ops');
    expect(await contents('agent-ops')).not.toContain('after unregistering from ops');
  });

  it('keeps no DM that was being heard while its author unregistered: the unregister forgot first, the DM is forgotten once stored', async () => {
    const OTHER = '123456789012345679';
    registered.add(`ops:${OTHER}`);
    let open: () => void = () => undefined;
    gate = new Promise((r) => (open = r));
    // The check sees the registration, and waits...
    const hearing = inbox.hear({ ...message('ops-dm-2', 'in flight while unregistering', true), authorId: OTHER }, 'live', 'ops');
    await new Promise((r) => setImmediate(r));
    // ... while the unregister commits and its news forgets the person's DMs with the ops bot.
    registered.delete(`ops:${OTHER}`);
    await inbox.forget(OTHER, 'ops');
    open();
    await hearing;
    expect(await contents('agent-ops')).not.toContain('in flight while unregistering');
  });

  it('the prune forgets the DMs with a bot the person is no longer registered with, and keeps those with the others', async () => {
    await inbox.prune(new Date(), 24 * 60 * 60 * 1000, 10_000);
    // The DMs only: what was said in channels stays.
    const dms = async (client: string) => (await inbox.list(scopeOf(client), '0', 100)).items.filter((e) => e.guild_id === null).map((e) => e.content || e.kind);
    expect(await dms('agent-ops')).toEqual([]);
    expect(await dms('agent-main')).toEqual(['to main']);
    expect(await contents('agent-ops')).toContain('in a listened channel');
  });
});

describe("Herald's own bots, as the inbox knows them", () => {
  it('leaves out another bot that cannot say who it is (its token revoked), asks it again later, and fails only with the default bot', async () => {
    let opsUp = false;
    let mainUp = true;
    const ownBots = ownBotIds(async (identity) => {
      if (identity === undefined) return mainUp ? SELF : Promise.reject(new Error('Discord unreachable'));
      return opsUp ? OPS_SELF : Promise.reject(new Error('401'));
    }, ['ops']);
    expect([...(await ownBots())]).toEqual([SELF]);
    opsUp = true;
    expect([...(await ownBots())].sort()).toEqual([SELF, OPS_SELF]);
    // Known once all have said: kept.
    mainUp = false;
    opsUp = false;
    expect([...(await ownBots())].sort()).toEqual([SELF, OPS_SELF]);
    const fresh = ownBotIds(async () => Promise.reject(new Error('Discord unreachable')), []);
    await expect(fresh()).rejects.toThrow('Discord unreachable');
  });
});
