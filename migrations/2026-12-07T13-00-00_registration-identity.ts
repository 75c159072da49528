import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A registration is with one bot (an identity: an operator-named Discord bot, or `default`, the
// platform's own variables'): a person registers with each bot that may reach them, and a pairing
// code, an agent's pairing and a DM belong to that bot's registration. Every registration, code and
// pairing stored before this was the default bot's.
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['registrations', 'pairing_codes', 'agent_pairings']) {
    await db.schema.alterTable(table).addColumn('identity', 'text', (c) => c.notNull().defaultTo('default')).execute();
  }
  await sql`alter table pairing_codes drop constraint pairing_codes_user_id_fkey`.execute(db);
  await sql`alter table registrations drop constraint registrations_pkey`.execute(db);
  await sql`alter table registrations add primary key (identity, user_id)`.execute(db);
  await sql`alter table pairing_codes add constraint pairing_codes_registration_fkey foreign key (identity, user_id) references registrations (identity, user_id) on delete cascade`.execute(db);
  await db.schema.dropIndex('pairing_codes_user').execute();
  await db.schema.createIndex('pairing_codes_user').on('pairing_codes').columns(['identity', 'user_id', 'issued_at']).execute();
  await db.schema.dropIndex('registrations_order').execute();
  await db.schema.createIndex('registrations_order').on('registrations').columns(['identity', 'registered_at', 'user_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  // Only the default bot's registrations fit the old shape.
  await sql`delete from agent_pairings where identity <> 'default'`.execute(db);
  await sql`delete from registrations where identity <> 'default'`.execute(db);
  await db.schema.dropIndex('registrations_order').execute();
  await db.schema.createIndex('registrations_order').on('registrations').columns(['registered_at', 'user_id']).execute();
  await db.schema.dropIndex('pairing_codes_user').execute();
  await db.schema.createIndex('pairing_codes_user').on('pairing_codes').columns(['user_id', 'issued_at']).execute();
  await sql`alter table pairing_codes drop constraint pairing_codes_registration_fkey`.execute(db);
  await sql`alter table registrations drop constraint registrations_pkey`.execute(db);
  await sql`alter table registrations add primary key (user_id)`.execute(db);
  await sql`alter table pairing_codes add constraint pairing_codes_user_id_fkey foreign key (user_id) references registrations (user_id) on delete cascade`.execute(db);
  for (const table of ['registrations', 'pairing_codes', 'agent_pairings']) await db.schema.alterTable(table).dropColumn('identity').execute();
}
