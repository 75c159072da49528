import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { startHerald } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/infra/db/database.js';
import { migrateToLatest } from '../../src/infra/db/migrate.js';
import type { Env } from '../../src/infra/env.js';
import { createLogger } from '../../src/infra/log.js';
import { adminQueries, runSchedule, sleep, startPostgres, type PhaseContext, type ScheduledEvent } from './campaign.js';
import type { Fleet } from './fleet.js';

/**
 * What every phase of the campaign does the same way: its own database, the chaos schedule's
 * kills and PostgreSQL outages, and the wait for the open work to settle. A phase brings its
 * sandboxes, its connectors, its faults and its verdict.
 */

/**
 * The phase's own database on the throwaway cluster, migrated, with every commit durable whatever
 * the cluster's defaults (with asynchronous commit `stop -m immediate` loses acknowledged commits,
 * which would not be Herald's doing); and a data folder of its own.
 */
export async function preparePhaseDatabase(c: PhaseContext, phase: string): Promise<{ databaseUrl: string; dataDir: string }> {
  const database = `chaos_${phase.replace(/[^a-z0-9]/g, '_')}`;
  await adminQueries(c.cluster.url(), [`create database ${database}`, `alter database ${database} set synchronous_commit = on`]);
  const databaseUrl = c.cluster.url(database);
  const dataDir = path.join(c.workDir, phase);
  await mkdir(dataDir, { recursive: true });
  // Migrated here rather than by a `herald migrate` child: on two busy cores that is seconds saved.
  const store = await openStore({ databaseUrl, dataDir });
  try {
    await migrateToLatest(store.db);
  } finally {
    await store.close();
  }
  return { databaseUrl, dataDir };
}

export interface ChaosRun {
  /** PostgreSQL's state: down now, and how often it was restarted. */
  pg: { down: boolean; restarts: number };
  /** Faults injected, by label. */
  faultCounts: Record<string, number>;
  /** Ends the schedule and waits for its kills and outages to finish; PostgreSQL is up after. */
  stop(): Promise<void>;
  /** Ends the schedule without waiting (a phase that failed or was interrupted, in its finally). */
  halt(): void;
}

/**
 * Runs the schedule from now: SIGKILLs (the member restarted), PostgreSQL stopped `-m immediate`
 * and started again, and the phase's own faults through `fault`.
 */
export function startChaos<F>(c: PhaseContext, fleet: Fleet, schedule: ScheduledEvent<F>[], log: (line: string) => void, fault: (fault: F) => void): ChaosRun {
  const aborted = () => c.signal?.aborted === true;
  let on = true;
  const pg = { down: false, restarts: 0 };
  const faultCounts: Record<string, number> = {};
  const executor = runSchedule(schedule, Date.now(), () => on && !aborted(), {
    kill: async (member) => {
      const who = await fleet.killAndRestart(member);
      if (who !== undefined) log(`SIGKILL ${who}`);
    },
    pg: async (downMs) => {
      log(`PostgreSQL: stop -m immediate, down for ${(downMs / 1000).toFixed(1)}s`);
      pg.down = true;
      try {
        await c.cluster.stop('immediate');
      } catch (err) {
        log(`  pg_ctl stop failed: ${String(err).slice(0, 200)}`);
      }
      await sleep(downMs);
      await startPostgres(c.cluster, log);
      pg.down = false;
      pg.restarts += 1;
      log('PostgreSQL: up again');
    },
    fault: (label, f) => {
      faultCounts[label] = (faultCounts[label] ?? 0) + 1;
      fault(f);
    },
  });
  return {
    pg,
    faultCounts,
    halt() {
      on = false;
    },
    async stop() {
      on = false;
      await executor;
      if (pg.down) await startPostgres(c.cluster, log);
    },
  };
}

/**
 * Waits until nothing is open or `settleS` has passed, saying every 10 s what is still open.
 * Answers whether everything settled.
 */
export async function settle(c: PhaseContext, open: () => number, describe: () => string, log: (line: string) => void): Promise<{ settled: boolean; settleMs: number }> {
  const start = Date.now();
  let lastReport = Date.now();
  while (open() > 0 && Date.now() - start < c.settleS * 1000 && c.signal?.aborted !== true) {
    await sleep(250);
    if (Date.now() - lastReport >= 10_000) {
      lastReport = Date.now();
      log(`  still open: ${open()} (${describe()})`);
    }
  }
  const settled = open() === 0;
  const settleMs = Date.now() - start;
  log(settled ? `settled in ${(settleMs / 1000).toFixed(1)}s` : `NOT settled after ${c.settleS}s: ${open()} open (${describe()})`);
  return { settled, settleMs };
}

/**
 * Starts an API-only Herald on the phase's `env` (no dispatcher, no gateway: nothing changes while
 * we look), answers what `read` reads from its URL, and stops it whatever happened.
 */
export async function readFromApiOnly<T>(env: Env, read: (url: string) => Promise<T>): Promise<T> {
  const herald = await startHerald({
    config: loadConfig({ ...env, PORT: '0', HERALD_GATEWAY: 'off', LOG_LEVEL: 'silent' }),
    log: createLogger('silent'),
    roles: { http: true, dispatcher: false },
  });
  try {
    return await read(herald.url ?? '');
  } finally {
    await herald.close().catch(() => undefined);
  }
}

/** A GET of one id at the end of a phase: its state (as `found` wraps it), unknown, or no answer. */
export type FinalRead<T> = T | { status: 404 } | { status: 'error'; detail: string };

/** GETs `pathOf(id)` for every id, 16 at a time; `found` makes the entry of a 200 from its body. */
export async function readFinals<T>(url: string, token: string, ids: readonly string[], pathOf: (id: string) => string, found: (body: unknown) => T, headersOf: (id: string) => Record<string, string> = () => ({})): Promise<Map<string, FinalRead<T>>> {
  const out = new Map<string, FinalRead<T>>();
  for (let i = 0; i < ids.length; i += 16) {
    await Promise.all(
      ids.slice(i, i + 16).map(async (id) => {
        try {
          const res = await fetch(`${url}${pathOf(id)}`, { headers: { authorization: `Bearer ${token}`, ...headersOf(id) }, signal: AbortSignal.timeout(10_000) });
          const text = await res.text();
          if (res.status === 200) out.set(id, found(JSON.parse(text)));
          else if (res.status === 404) out.set(id, { status: 404 });
          else out.set(id, { status: 'error', detail: `${res.status} ${text}` });
        } catch (err) {
          out.set(id, { status: 'error', detail: String(err) });
        }
      }),
    );
  }
  return out;
}

/** The sandbox Discord's requests by method, path (ids and interaction tokens folded) and status. */
export function countSandboxRequests(requests: readonly { method: string; path: string; status: number }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of requests) {
    // A request whose client gave up while a fault held it records Koa's default 404.
    const key = `${r.method} ${r.path.replace(/^\/interactions\/.*/, '/interactions/…').replace(/[0-9]{15,}/g, ':id')} ${r.status}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}
