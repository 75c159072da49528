import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The media archive's storage accounting, in the database so that every step of every process
// counts against one number:
// - media_storage: one row, the bytes of every stored file. A trigger keeps it equal to the sum
//   of media_blobs whoever writes that table, and its row lock serializes reserving and committing.
// - media_reservations: room taken for a file before it is written, held under the scrape step's
//   lease (a reservation whose step ended, lost its lease or died is no longer counted).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('media_storage')
    .addColumn('id', 'integer', (c) => c.primaryKey().check(sql`id = 1`))
    .addColumn('used_bytes', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into media_storage (id, used_bytes) select 1, coalesce(sum(size_bytes), 0) from media_blobs`.execute(db);
  await sql`
    create function media_blobs_count_bytes() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        update media_storage set used_bytes = used_bytes + new.size_bytes where id = 1;
        return new;
      elsif tg_op = 'UPDATE' then
        update media_storage set used_bytes = used_bytes + new.size_bytes - old.size_bytes where id = 1;
        return new;
      end if;
      update media_storage set used_bytes = used_bytes - old.size_bytes where id = 1;
      return old;
    end
    $$`.execute(db);
  await sql`create trigger media_blobs_count_bytes after insert or update of size_bytes or delete on media_blobs for each row execute function media_blobs_count_bytes()`.execute(db);

  await db.schema
    .createTable('media_reservations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('scrape_id', 'text', (c) => c.notNull().references('media_scrapes.id').onDelete('cascade'))
    .addColumn('lease_owner', 'text', (c) => c.notNull())
    // With the owner, which claim of the scrape: a worker claims the same scrape again and again.
    .addColumn('lease_expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('media_reservations').execute();
  await sql`drop trigger media_blobs_count_bytes on media_blobs`.execute(db);
  await sql`drop function media_blobs_count_bytes()`.execute(db);
  await db.schema.dropTable('media_storage').execute();
}
