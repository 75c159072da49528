import { Writable } from 'node:stream';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { InboxMetrics } from '../src/modules/inbox/inbox.metrics.js';
import { CONNECTOR } from '../src/modules/inbox/inbox.scope.js';
import { InboxService } from '../src/modules/inbox/inbox.service.js';
import type { InboxDb } from '../src/modules/inbox/inbox.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { InboundMessage } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { TestClock } from './support/herald.js';

/**
 * The inbox's bounds, on the service (PGlite, or PostgreSQL with TEST_DATABASE_URL): retention by
 * age and by count per channel, counted in herald_inbox_dropped_total; DMs of someone no longer
 * registered go; content never reaches the log.
 */

const SELF = '111111111111111111';
const PERSON = '123456789012345678';
const CONNECTOR_SCOPE = { cursor: CONNECTOR, identity: 'default', visible: undefined };
let fixture: MigratedStore | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

function service(registered: Set<string>) {
  const clock = new TestClock();
  const registry = new Registry();
  const lines: string[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) }));
  const db = tablesOf<InboxDb>(fixture?.store.db ?? (undefined as never));
  const inbox = new InboxService(
    db,
    {
      selfId: async () => SELF,
      ownBots: async () => new Set([SELF]),
      isRegistered: async (id) => registered.has(id),
      sentByHerald: async () => new Set(),
      listened: async () => new Set(['c1', 'c2']),
      handoffClaims: () => false,
      destinationsByChannel: async () => new Map([['c1', new Set(['alerts'])], ['c2', new Set(['ops'])]]),
      parentOf: async () => undefined,
    },
    clock,
    { platform: 'discord', push: false, pushIdentity: 'default', publish: () => undefined, ring: () => undefined, log, metrics: new InboxMetrics(registry), waitPollMs: 50 },
  );
  return { inbox, clock, registry, lines };
}

let next = 1000;
/** A message in a guild channel, or (`dm`) in a DM: no guild. */
const message = (channelId: string, content: string, dm = false): InboundMessage => ({
  channelId,
  messageId: String(next++),
  authorId: PERSON,
  authorIsBot: false,
  guildId: dm ? undefined : 'g1',
  content,
  createdAt: new Date(),
});

describe('inbox retention and privacy', () => {
  it('drops by count per channel and by age, counts what it dropped, forgets DMs of the unregistered, and never logs content', async () => {
    fixture = await migratedStore();
    const registered = new Set([PERSON]);
    const { inbox, clock, registry, lines } = service(registered);
    for (let i = 0; i < 5; i++) await inbox.hear(message('c1', `secret words ${i}`), 'live');
    await inbox.hear(message('c2', 'secret words in c2'), 'live');
    await inbox.hear(message('dm1', 'a secret DM', true), 'live');
    expect((await inbox.list(CONNECTOR_SCOPE, '0', 100)).items.map((e) => e.kind)).toEqual(['message', 'message', 'message', 'message', 'message', 'message', 'dm']);

    // By count: at most 2 per channel, the newest kept.
    await inbox.prune(clock.now(), 30 * 86_400_000, 2);
    const kept = (await inbox.list(CONNECTOR_SCOPE, '0', 100)).items;
    expect(kept.filter((e) => e.channel_id === 'c1').map((e) => e.content)).toEqual(['secret words 3', 'secret words 4']);
    expect(kept.filter((e) => e.channel_id === 'c2')).toHaveLength(1);
    const dropped = async (reason: string) => (await registry.getSingleMetricAsString('herald_inbox_dropped_total')).match(new RegExp(`reason="${reason}"} ([0-9]+)`))?.[1];
    expect(await dropped('count')).toBe('3');

    // The person unregistered while no news of it reached this process: the prune forgets their DMs.
    registered.delete(PERSON);
    await inbox.prune(clock.now(), 30 * 86_400_000, 2);
    expect((await inbox.list(CONNECTOR_SCOPE, '0', 100)).items.some((e) => e.kind === 'dm')).toBe(false);
    expect(await dropped('unregistered')).toBe('1');

    // By age.
    clock.offsetMs = 31 * 86_400_000;
    await inbox.prune(clock.now(), 30 * 86_400_000, 2);
    expect((await inbox.list(CONNECTOR_SCOPE, '0', 100)).items).toEqual([]);
    expect(await dropped('age')).toBe('3');

    // Ids and kinds are logged; content never.
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain('secret');
  }, 90_000);

  it('stores a message once however often it is heard, and a DM only from a registered user', async () => {
    fixture = await migratedStore();
    const { inbox } = service(new Set());
    const m = message('c1', 'once');
    await Promise.all([inbox.hear(m, 'live'), inbox.hear(m, 'catch-up'), inbox.hear(m, 'live')]);
    await inbox.hear(message('dm2', 'from a stranger', true), 'live');
    await inbox.hear(message('elsewhere', 'not listened'), 'live');
    expect((await inbox.list(CONNECTOR_SCOPE, '0', 100)).items.map((e) => e.message_id)).toEqual([m.messageId]);
  }, 90_000);
});
