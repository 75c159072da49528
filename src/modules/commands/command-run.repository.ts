import type { Kysely } from 'kysely';
import type { CommandsDb } from './command-run.table.js';
import type { CommandRunResult, CommandRunRow } from './command-run.table.js';

type Db = Kysely<CommandsDb>;

/** What a claim found: the key and the source message are this execute's now, or one was taken. */
export type Claim = 'claimed' | 'key_taken' | 'source_used';

/** Thrown inside the claim's transaction to roll back the key's row when the source was taken. */
class SourceUsed extends Error {}

/**
 * Claim a key and its source message for a new execute, in one transaction: the key with INSERT …
 * ON CONFLICT DO NOTHING (of two replicas racing on one key exactly one runs the command; a
 * finished row past its window is deleted first, so its key is free again; a running row past its
 * lease lost the process running it, and becomes `interrupted`, a final answer replayed like any
 * other, so the key stays taken), then the source message the same
 * way, on its primary key: a message authorises one execute, so when another execute (another
 * key) holds it the whole claim rolls back. A source claim is never freed early: only the prune
 * removes it, once no freshness window could accept the message again (`keepUntil`).
 */
export async function claimCommandRun(
  db: Db,
  run: { key: string; invocationHash: string; now: Date; expiresAt: Date; interrupted: { result: CommandRunResult; keepUntil: Date } },
  source: { messageId: string; keepUntil: Date },
): Promise<Claim> {
  try {
    return await db.transaction().execute(async (trx) => {
      const ended = await trx
        .updateTable('command_runs')
        .set({ status: 'done', result: JSON.stringify(run.interrupted.result), expires_at: run.interrupted.keepUntil })
        .where('idempotency_key', '=', run.key)
        .where('status', '=', 'running')
        .where('expires_at', '<=', run.now)
        .returning('idempotency_key')
        .executeTakeFirst();
      if (ended !== undefined) return 'key_taken';
      await trx.deleteFrom('command_runs').where('idempotency_key', '=', run.key).where('expires_at', '<=', run.now).execute();
      const claimedKey = await trx
        .insertInto('command_runs')
        .values({ idempotency_key: run.key, invocation_hash: run.invocationHash, status: 'running', result: null, created_at: run.now, expires_at: run.expiresAt })
        .onConflict((oc) => oc.column('idempotency_key').doNothing())
        .returning('idempotency_key')
        .executeTakeFirst();
      if (claimedKey === undefined) return 'key_taken';
      const claimedSource = await trx
        .insertInto('command_sources')
        .values({ source_message_id: source.messageId, idempotency_key: run.key, claimed_at: run.now, expires_at: source.keepUntil })
        .onConflict((oc) => oc.column('source_message_id').doNothing())
        .returning('source_message_id')
        .executeTakeFirst();
      if (claimedSource === undefined) throw new SourceUsed();
      return 'claimed';
    });
  } catch (err) {
    if (err instanceof SourceUsed) return 'source_used';
    throw err;
  }
}

export async function findCommandRun(db: Db, key: string): Promise<CommandRunRow | undefined> {
  return db.selectFrom('command_runs').selectAll().where('idempotency_key', '=', key).executeTakeFirst();
}

/**
 * Store a finished run's result, replayed until `expiresAt`; not over an `interrupted` answer given
 * meanwhile (its lease had lapsed), so every ask of one key hears one answer.
 */
export async function finishCommandRun(db: Db, key: string, result: CommandRunResult, expiresAt: Date): Promise<void> {
  await db.updateTable('command_runs').set({ status: 'done', result: JSON.stringify(result), expires_at: expiresAt }).where('idempotency_key', '=', key).where('status', '=', 'running').execute();
}

/** A running run's lease, renewed while its process runs it. */
export async function renewCommandRun(db: Db, key: string, until: Date): Promise<void> {
  await db.updateTable('command_runs').set({ expires_at: until }).where('idempotency_key', '=', key).where('status', '=', 'running').execute();
}

/** Forget runs past their replay window and source claims past every freshness window (the outbox's hourly prune calls this too). */
export async function pruneCommandRuns(db: Db, now: Date): Promise<number> {
  const runs = await db.deleteFrom('command_runs').where('expires_at', '<=', now).executeTakeFirst();
  const sources = await db.deleteFrom('command_sources').where('expires_at', '<=', now).executeTakeFirst();
  return Number(runs.numDeletedRows) + Number(sources.numDeletedRows);
}
