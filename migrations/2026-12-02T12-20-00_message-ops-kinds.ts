import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Two delivery kinds that act on a message already there (issue 25): `delete` (Herald's own post
// or DM, by message_ref) and `reaction` (Herald's reaction on a message). Their rows are ordinary
// deliveries; only the kind check grows.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply', 'handoff', 'chat', 'delete', 'reaction'))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from deliveries where kind in ('delete', 'reaction')`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply', 'handoff', 'chat'))`.execute(db);
}
