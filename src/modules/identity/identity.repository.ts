import { sql, type Kysely } from 'kysely';
import type { IdentityDb } from './identity.table.js';
import type { RegistrationRow } from './identity.table.js';

type Db = Kysely<IdentityDb>;

export async function findRegistration(db: Db, userId: string): Promise<RegistrationRow | undefined> {
  return db.selectFrom('registrations').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** Register if not registered; returns the new row, or undefined when already registered. */
export async function insertRegistration(db: Db, row: RegistrationRow): Promise<RegistrationRow | undefined> {
  return db.insertInto('registrations').values(row).onConflict((oc) => oc.column('user_id').doNothing()).returningAll().executeTakeFirst();
}

/** Deletes the registration; its codes go with it (ON DELETE CASCADE), in the same statement. */
export async function deleteRegistration(db: Db, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('registrations').where('user_id', '=', userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function insertPairingCode(db: Db, row: { code_hash: string; user_id: string; generation: string; issued_at: Date; expires_at: Date }): Promise<void> {
  await db.insertInto('pairing_codes').values(row).execute();
}

/** Keep only the newest `keep` live codes of a user; expired ones go too. */
export async function trimPairingCodes(db: Db, userId: string, keep: number, now: Date): Promise<void> {
  await db.deleteFrom('pairing_codes').where('user_id', '=', userId).where('expires_at', '<=', now).execute();
  await db
    .deleteFrom('pairing_codes')
    .where('user_id', '=', userId)
    .where(
      'code_hash',
      'not in',
      db.selectFrom('pairing_codes').select('code_hash').where('user_id', '=', userId).orderBy('issued_at', 'desc').orderBy('code_hash').limit(keep),
    )
    .execute();
}

/**
 * Use a code: one statement deletes it (so it works once, whoever races) and answers with the
 * registration it was issued for, only if that registration is still the same generation.
 */
export async function redeemPairingCode(db: Db, codeHash: string, now: Date): Promise<{ user_id: string; generation: string; transport: string | null } | undefined> {
  const result = await sql<{ user_id: string; generation: string; transport: string | null }>`
    with used as (
      delete from pairing_codes where code_hash = ${codeHash} and expires_at > ${now}
      returning user_id, generation
    )
    select r.user_id, r.generation, r.transport from used join registrations r on r.user_id = used.user_id and r.generation = used.generation
  `.execute(db);
  return result.rows[0];
}

/** The caller's pairing, replacing its earlier one. */
export async function savePairing(db: Db, row: { principal: string; user_id: string; generation: string; paired_at: Date }): Promise<void> {
  await db
    .insertInto('agent_pairings')
    .values(row)
    .onConflict((oc) => oc.column('principal').doUpdateSet({ user_id: row.user_id, generation: row.generation, paired_at: row.paired_at }))
    .execute();
}

export async function findPairing(db: Db, principal: string): Promise<{ user_id: string; generation: string; paired_at: Date; transport: string | null } | undefined> {
  return db
    .selectFrom('agent_pairings as p')
    .leftJoin('registrations as r', 'r.user_id', 'p.user_id')
    .select(['p.user_id', 'p.generation', 'p.paired_at', 'r.transport'])
    .where('p.principal', '=', principal)
    .executeTakeFirst();
}

export async function listRegistrations(db: Db, limit: number): Promise<RegistrationRow[]> {
  return db.selectFrom('registrations').selectAll().orderBy('registered_at').orderBy('user_id').limit(limit).execute();
}
