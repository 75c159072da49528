import { sql, type Kysely } from 'kysely';
import type { IdentityDb } from './identity.table.js';
import type { RegistrationRow } from './identity.table.js';

type Db = Kysely<IdentityDb>;

/** A person's registration with one bot (an identity). */
export async function findRegistration(db: Db, identity: string, userId: string): Promise<RegistrationRow | undefined> {
  return db.selectFrom('registrations').selectAll().where('identity', '=', identity).where('user_id', '=', userId).executeTakeFirst();
}

/** Register if not registered; returns the new row, or undefined when already registered. */
export async function insertRegistration(db: Db, row: RegistrationRow): Promise<RegistrationRow | undefined> {
  return db.insertInto('registrations').values(row).onConflict((oc) => oc.columns(['identity', 'user_id']).doNothing()).returningAll().executeTakeFirst();
}

/** Deletes the registration; its codes go with it (ON DELETE CASCADE), in the same statement. */
export async function deleteRegistration(db: Db, identity: string, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('registrations').where('identity', '=', identity).where('user_id', '=', userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function insertPairingCode(db: Db, row: { code_hash: string; identity: string; user_id: string; generation: string; issued_at: Date; expires_at: Date }): Promise<void> {
  await db.insertInto('pairing_codes').values(row).execute();
}

/** Keep only the newest `keep` live codes of a user's registration with a bot; expired ones go too. */
export async function trimPairingCodes(db: Db, identity: string, userId: string, keep: number, now: Date): Promise<void> {
  await db.deleteFrom('pairing_codes').where('identity', '=', identity).where('user_id', '=', userId).where('expires_at', '<=', now).execute();
  await db
    .deleteFrom('pairing_codes')
    .where('identity', '=', identity)
    .where('user_id', '=', userId)
    .where(
      'code_hash',
      'not in',
      db.selectFrom('pairing_codes').select('code_hash').where('identity', '=', identity).where('user_id', '=', userId).orderBy('issued_at', 'desc').orderBy('code_hash').limit(keep),
    )
    .execute();
}

/**
 * Use a code: one statement deletes it (so it works once, whoever races) and answers with the
 * registration it was issued for, only if that registration is still the same generation. Only a
 * code of `identity`'s bot: another bot's code is left unused, as if it did not exist.
 */
export async function redeemPairingCode(db: Db, identity: string, codeHash: string, now: Date): Promise<{ user_id: string; generation: string; transport: string | null } | undefined> {
  const result = await sql<{ user_id: string; generation: string; transport: string | null }>`
    with used as (
      delete from pairing_codes where code_hash = ${codeHash} and identity = ${identity} and expires_at > ${now}
      returning identity, user_id, generation
    )
    select r.user_id, r.generation, r.transport from used join registrations r on r.identity = used.identity and r.user_id = used.user_id and r.generation = used.generation
  `.execute(db);
  return result.rows[0];
}

/** The caller's pairing, replacing its earlier one. */
export async function savePairing(db: Db, row: { principal: string; identity: string; user_id: string; generation: string; paired_at: Date }): Promise<void> {
  await db
    .insertInto('agent_pairings')
    .values(row)
    .onConflict((oc) => oc.column('principal').doUpdateSet({ identity: row.identity, user_id: row.user_id, generation: row.generation, paired_at: row.paired_at }))
    .execute();
}

/** The caller's pairing with a registration of `identity`'s bot (a pairing with another bot's is not its own). */
export async function findPairing(db: Db, identity: string, principal: string): Promise<{ user_id: string; generation: string; paired_at: Date; transport: string | null } | undefined> {
  return db
    .selectFrom('agent_pairings as p')
    .leftJoin('registrations as r', (j) => j.onRef('r.identity', '=', 'p.identity').onRef('r.user_id', '=', 'p.user_id'))
    .select(['p.user_id', 'p.generation', 'p.paired_at', 'r.transport'])
    .where('p.principal', '=', principal)
    .where('p.identity', '=', identity)
    .executeTakeFirst();
}

/** The people registered with `identity`'s bot, oldest first. */
export async function listRegistrations(db: Db, identity: string, limit: number): Promise<RegistrationRow[]> {
  return db.selectFrom('registrations').selectAll().where('identity', '=', identity).orderBy('registered_at').orderBy('user_id').limit(limit).execute();
}
