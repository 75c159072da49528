import type { Kysely } from 'kysely';
import type { Database } from '../../schema.js';
import type { CommandRunResult, CommandRunRow } from './command-run.table.js';

type Db = Kysely<Database>;

/**
 * Claim a key for a new execute: one INSERT … ON CONFLICT DO NOTHING, so of two replicas racing on
 * one key exactly one runs the command. False: the key is taken (see findCommandRun). A row past
 * its window is deleted first, so its key is free again.
 */
export async function claimCommandRun(db: Db, key: string, invocationHash: string, now: Date, expiresAt: Date): Promise<boolean> {
  await db.deleteFrom('command_runs').where('idempotency_key', '=', key).where('expires_at', '<=', now).execute();
  const row = await db
    .insertInto('command_runs')
    .values({ idempotency_key: key, invocation_hash: invocationHash, status: 'running', result: null, created_at: now, expires_at: expiresAt })
    .onConflict((oc) => oc.column('idempotency_key').doNothing())
    .returning('idempotency_key')
    .executeTakeFirst();
  return row !== undefined;
}

export async function findCommandRun(db: Db, key: string): Promise<CommandRunRow | undefined> {
  return db.selectFrom('command_runs').selectAll().where('idempotency_key', '=', key).executeTakeFirst();
}

/** Store a finished run's result, replayed until `expiresAt`. */
export async function finishCommandRun(db: Db, key: string, result: CommandRunResult, expiresAt: Date): Promise<void> {
  await db.updateTable('command_runs').set({ status: 'done', result: JSON.stringify(result), expires_at: expiresAt }).where('idempotency_key', '=', key).execute();
}

/** Forget runs past their replay window (the outbox's hourly prune calls this too). */
export async function pruneCommandRuns(db: Db, now: Date): Promise<number> {
  const r = await db.deleteFrom('command_runs').where('expires_at', '<=', now).executeTakeFirst();
  return Number(r.numDeletedRows);
}
