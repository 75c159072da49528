import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A command run with responseMode "discord" posts its replies through the outbox as deliveries of
// an internal kind, `reply`, addressed to a channel rather than a destination. The protocol's
// kinds (post, dm, edit) are unchanged: a connector cannot create a `reply`.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply'))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from deliveries where kind = 'reply'`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit'))`.execute(db);
}
