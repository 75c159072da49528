import { Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coreMigrations } from '../migrations/index.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import { openStore, type Store } from '../src/infra/db/database.js';
import { migrateToLatest } from '../src/infra/db/migrate.js';
import type { Database } from '../src/schema.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { platformsOf } from '../src/platforms/platform.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';

/** Chat sends stored before they were rows of the deliveries outbox read back the same after the migration. */
describe('migration 2026-12-02T03-00-00_chat-kind', () => {
  let db: TestDatabase;
  let store: Store<Database>;

  beforeAll(async () => {
    db = await testDatabase();
    store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    const migrator = new Migrator({ db: store.db, provider: { getMigrations: coreMigrations } });
    const before = await migrator.migrateTo('2026-12-01T22-30-00_media-storage');
    if (before.error !== undefined) throw before.error;
    const at = new Date('2026-12-01T12:00:00Z');
    await sql`insert into chat_sends (id, transport, channel, sender, text, status, reason, message_ids, attempts, created_at, next_attempt_at)
      values ('a1', 'memory', 'general', 'ada', 'hello', 'delivered', null, '["m1","m2"]', 1, ${at}, ${at}),
             ('b2', 'irc', '#agents', 'bob', 'no proof', 'unconfirmed', 'no echo', '["x"]', 1, ${at}, ${at}),
             ('c3', 'memory', 'general', 'ada', 'refused', 'failed', 'memory: refused', null, 2, ${at}, ${at})`.execute(store.db);
    await migrateToLatest(store.db);
  }, 120_000);
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('copies every chat send into deliveries (kind chat, request_id chat:<id>) and drops chat_sends', async () => {
    const clock = { now: () => new Date() };
    const chat = new ChatService(new DeliveryService(tablesOf<DeliveriesDb>(store.db), clock, { post: true, dm: true, edit: true }), platformsOf(new MemoryPlatform()), 'memory', clock);
    expect(await chat.get('a1')).toEqual({ id: 'a1', transport: 'memory', channel: 'general', sender: 'ada', state: 'delivered', message_ids: ['m1', 'm2'] });
    expect(await chat.get('b2')).toEqual({ id: 'b2', transport: 'irc', channel: '#agents', sender: 'bob', state: 'unconfirmed', message_ids: ['x'], reason: 'no echo' });
    expect(await chat.get('c3')).toEqual({ id: 'c3', transport: 'memory', channel: 'general', sender: 'ada', state: 'failed', reason: 'memory: refused' });
    const kinds = await store.db.selectFrom('deliveries').select(['request_id', 'kind']).orderBy('request_id').execute();
    expect(kinds).toEqual([
      { request_id: 'chat:a1', kind: 'chat' },
      { request_id: 'chat:b2', kind: 'chat' },
      { request_id: 'chat:c3', kind: 'chat' },
    ]);
    // The same send again is the stored one; another payload under its id is still refused.
    expect((await chat.send({ channel: 'general', text: 'hello', sender: 'ada', request_id: 'a1' })).state).toBe('delivered');
    await expect(chat.send({ channel: 'general', text: 'other', sender: 'ada', request_id: 'a1' })).rejects.toThrow('request_id reused with a different payload');
    await expect(sql`select 1 from chat_sends`.execute(store.db)).rejects.toThrow();
  });
});
