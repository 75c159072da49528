/**
 * `npm run bench`: Herald's speed as ratios against baselines measured in the same run (this
 * machine is noisy; a ratio is not). PostgreSQL (TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/postgres
 * as the server to create a throwaway database on) and PGlite columns:
 *
 * - ingest: distinct request_ids with realistic bodies at 32 connections vs the same single-row
 *   INSERT run directly at the same concurrency, and vs a bare Node HTTP server doing that INSERT;
 *   then the same load spread over three replicas (serve processes) on the one database;
 * - reads: a GET and a repeated POST (one statement) of 1,000 stored deliveries in random order vs a
 *   bare Node server doing the same primary-key SELECT through a pool of Herald's size in its own process; /healthz vs a bare Node
 *   HTTP server (alternating rounds after a warm-up);
 * - drain of N deliveries over 100 channels through the sandbox with Discord's limits (50/s global,
 *   5 per 5 s per channel) with 1 and 3 dispatcher processes, vs the floor N/50 s; 429s by scope;
 * - 202 → sandbox receipt at low load, p50/p99;
 * - idle: resident memory, heap and external memory after start-up (with --heap, also where it is:
 *   RSS by kind of mapping and a summarised heap snapshot, heap.ts); of the compiled CLI as
 *   `npm start` runs it (built first when dist/ is older than src/), as is the memory phase;
 *   --tsx measures both under tsx instead (its compiler and source maps cost about 30 MB);
 * - steady: RSS and event-loop lag under a steady 100 requests/s (--steady=SECONDS; 600 is the full run);
 * - resident memory with 1,000,000 stored deliveries (20,000 with --quick) vs with none;
 * - query_media over 1,000,000 archived items (20,000 with --quick), each filter's median and p99 ms
 *   per page over 100 rounds (archive-query.ts; a p99 over 100 ms is reported);
 * - slack: 600 posts drained over 20 Slack sandbox channels (1 message/s each, as Slack) by three
 *   Herald processes, vs the floor 600/20 s; the 429s and duplicates (slack-drain.ts);
 * - scrape: a links scrape of the sandbox's media channel (20,000 messages, 2,000 quick) vs the floor
 *   the history route's bucket and the global limit allow (pages / pages per second); 429s
 *   (archive-scrape.ts);
 * - hear: a person's mention → /mcp/inbox/next, and POST /mcp/handoffs on one Herald → the other's
 *   /mcp/handoffs/inbox/next, p50/p99 vs a bare gateway client receiving the same messages
 *   (hear-latency.ts; --quick: PostgreSQL only);
 * - irc: chat lines flooded to a throwaway InspIRCd under 4 sender nicks by one Herald, vs the floor
 *   N / (min(the server's allowance, HERALD_IRC_LINES_PER_SECOND) × connections); lost, duplicated, flood QUITs
 *   (irc-flood.ts);
 * - vacuum: the outbox's claims/s while a long transaction holds back vacuum vs with nothing held,
 *   the dead tuples and the claim's plan (vacuum.ts; PostgreSQL only);
 * - twins: 100 identical alerts to one channel drained (they take turns) vs 100 distinct ones, the
 *   ratio, duplicates (twins.ts);
 * - identities: one bot's drain of 100 posts alone vs beside another bot's 429 storm in the same
 *   Herald (identities.ts), the ratio, duplicates;
 * - slack-identities: one Slack workspace's drain of 200 posts alone vs beside another workspace's
 *   backlog of 400 posts to one channel, in the same Herald (slack-identities.ts; PostgreSQL only),
 *   the ratio, 429s, duplicates, messages from another bot.
 *
 * Options: --quick (short phases), --only=reads,ingest,latency,drain,slack,idle,steady,memory,archive,scrape,hear,irc,vacuum,twins,identities,slack-identities,
 * --steady=SECONDS, --out=FILE, --heap, --tsx. The JSON holds the command, the commit, the machine and each floor.
 * Every process and database it starts is ended and dropped, also on Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result } from 'autocannon';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { openStore } from '../../src/infra/db/database.js';
import { migrateToLatest } from '../../src/infra/db/migrate.js';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { DiscordSandbox, SANDBOX_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';
import { startHeraldProcess, type HeraldProcess, type RunOptions } from '../support/process.js';
import { archiveQueryPhase, BENCH_ITEMS } from './archive-query.js';
import { scrapePhase } from './archive-scrape.js';
import { ircFlood } from './irc-flood.js';
import { heapNodeOptions, heapReport } from './heap.js';
import { slackDrain } from './slack-drain.js';
import { hearLatency } from './hear-latency.js';
import { vacuumPhase } from './vacuum.js';
import { twinsDrain } from './twins.js';
import { identitiesIsolation } from './identities.js';
import { slackIdentitiesIsolation } from './slack-identities.js';
import { deliveryRequest, INSERT_SQL, insertParams } from './rows.js';
import { formatDuration } from '../support/script-args.js';
import { args, argv, only, quick, STEADY_S } from './options.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const outFile = args.out ?? path.join(ROOT, 'data', 'bench', `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
const serverUrl = process.env['TEST_DATABASE_URL'] || 'postgres://postgres@127.0.0.1:5432/postgres';

const INGEST_S = quick ? 4 : 15;
/** Each read measurement: READ_ROUNDS rounds of READ_S seconds, alternating with the others. */
const READ_S = quick ? 2 : 4;
const READ_ROUNDS = quick ? 2 : 3;
/** Herald's HERALD_DB_POOL_SIZE default: the bare SELECT server's pool. */
const HERALD_POOL = 16;
/** Deliveries the reads phase stores, then reads and repeats in random order. */
const READ_ROWS = 1_000;
/** Idle: seconds after start-up before the resident set is read. */
const IDLE_S = quick ? 3 : 10;
/** Steady load: seconds (`--steady=600` for the full 10 minutes) and requests per second. */
const STEADY_RATE = 100;
const CONNECTIONS = 32;
/** Ingest on several replicas (serve processes) on one PostgreSQL database. */
const REPLICAS = 3;
const DRAIN_N = quick ? 600 : 3_000;
const GLOBAL_PER_S = 50;
const STORED = quick ? 20_000 : 1_000_000;
/** Posts drained through Slack (over SLACK_CHANNELS channels at 1/s each: a 30 s floor, 6 s quick). */
const SLACK_N = quick ? 120 : 600;

const cleanups: (() => Promise<unknown>)[] = [];
const children = new Set<ChildProcess>();
process.on('SIGINT', () => void cleanup().finally(() => process.exit(130)));

async function cleanup(): Promise<void> {
  for (const c of children) c.kill('SIGKILL');
  while (cleanups.length > 0) await cleanups.pop()?.().catch(() => undefined);
}

// ---------------------------------------------------------------- measuring

interface Rate {
  rate: number;
  p50: number;
  p99: number;
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN);
}

/** `concurrency` loops calling `op` for `seconds`: operations per second and latency in ms. */
async function loop(concurrency: number, seconds: number, op: () => Promise<unknown>): Promise<Rate> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await op();
          latencies.push(performance.now() - t);
        } catch {
          errors += 1;
        }
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { rate: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}

function fromCannon(r: Result): Rate {
  return { rate: r.requests.total / r.duration, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx };
}

async function cannon(url: string, seconds: number, request: { method?: string; headers?: Record<string, string>; body?: () => string; path?: () => string }, connections = CONNECTIONS): Promise<Rate> {
  const body = request.body;
  const path = request.path;
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [
      {
        method: request.method ?? 'GET',
        headers: { 'content-type': 'application/json', ...(request.headers ?? {}) },
        ...(body !== undefined || path !== undefined ? { setupRequest: (req) => ({ ...req, ...(body !== undefined ? { body: body() } : {}), ...(path !== undefined ? { path: path() } : {}) }) } : {}),
      },
    ],
  });
  return fromCannon(result);
}

/**
 * CONNECTIONS connections spread over several servers (each target its own share), at once: the
 * rates add up; each latency is the worst target's (a conservative p50 and p99).
 */
async function cannonSpread(targets: readonly { url: string; headers: Record<string, string> }[], seconds: number, request: { method?: string; body?: () => string }): Promise<Rate> {
  const share = (i: number): number => Math.floor(CONNECTIONS / targets.length) + (i < CONNECTIONS % targets.length ? 1 : 0);
  const rates = await Promise.all(targets.map((t, i) => cannon(t.url, seconds, { ...request, headers: t.headers }, share(i))));
  return {
    rate: rates.reduce((sum, r) => sum + r.rate, 0),
    p50: Math.max(...rates.map((r) => r.p50)),
    p99: Math.max(...rates.map((r) => r.p99)),
    errors: rates.reduce((sum, r) => sum + r.errors, 0),
  };
}

const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100;
const ms = (x: number): number => Math.round(x * 10) / 10;

// ---------------------------------------------------------------- processes

function spawnChild(script: string, env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m !== null) resolve({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}`)));
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

interface Store {
  name: 'postgres' | 'pglite';
  databaseUrl: string | undefined;
  dataDir: string;
  /** Run SQL on the store (PGlite: only while no Herald holds it). */
  sql<T = unknown>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

async function postgresStore(): Promise<Store> {
  const name = `herald_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const databaseUrl = u.toString();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-bench-'));
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS });
  const store = await openStore({ databaseUrl, dataDir });
  await migrateToLatest(store.db);
  await store.close();
  const dropped = async () => {
    await pool.end();
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    await c.query(`drop database if exists ${name} with (force)`).finally(() => c.end());
    await rm(dataDir, { recursive: true, force: true });
  };
  cleanups.push(dropped);
  return {
    name: 'postgres',
    databaseUrl,
    dataDir,
    sql: async (text, params) => (await pool.query(text, params)).rows,
    close: async () => {
      cleanups.splice(cleanups.indexOf(dropped), 1);
      await dropped();
    },
  };
}

async function pgliteStore(): Promise<Store> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-bench-'));
  const removed = () => rm(dataDir, { recursive: true, force: true });
  cleanups.push(removed);
  const store = await openStore({ databaseUrl: undefined, dataDir });
  await migrateToLatest(store.db);
  await store.close();
  return {
    name: 'pglite',
    databaseUrl: undefined,
    dataDir,
    // Opened per call: Herald's process holds the data folder while it runs.
    sql: async <T>(text: string, params: unknown[] = []) => {
      const s = await openStore({ databaseUrl: undefined, dataDir });
      try {
        return (await s.db.executeQuery(CompiledQuery.raw(text, params))).rows as T[];
      } finally {
        await s.close();
      }
    },
    close: async () => {
      cleanups.splice(cleanups.indexOf(removed), 1);
      await removed();
    },
  };
}

interface Running {
  procs: HeraldProcess[];
  url: string;
  bridge: Record<string, string>;
  admin: Record<string, string>;
}

async function startHerald(store: Store, sandbox: DiscordSandbox, dispatchers = 1, extra: Record<string, string> = {}, options: RunOptions = {}): Promise<Running> {
  const bridgeToken = randomBytes(32).toString('base64url');
  const adminToken = randomBytes(32).toString('base64url');
  const env = {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    MCP_BRIDGE_TOKEN: bridgeToken,
    HERALD_ADMIN_TOKEN: adminToken,
    HERALD_DATA_DIR: store.dataDir,
    DISCORD_TOKEN: sandbox.botToken,
    DISCORD_API_URL: sandbox.apiUrl,
    ...(store.databaseUrl !== undefined ? { DATABASE_URL: store.databaseUrl } : {}),
    ...extra,
  };
  const serve = await startHeraldProcess(['serve'], env, 60_000, options);
  children.add(serve.child);
  const procs = [serve];
  for (let i = 1; i < dispatchers; i++) {
    const d = await startHeraldProcess(['dispatch'], env);
    children.add(d.child);
    procs.push(d);
  }
  return { procs, url: serve.url ?? '', bridge: { authorization: `Bearer ${bridgeToken}` }, admin: { authorization: `Bearer ${adminToken}` } };
}

async function stopHerald(h: Running): Promise<void> {
  await Promise.all(h.procs.map((p) => stop(p.child)));
}

async function call(h: Running, method: string, p: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(h.url + p, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text) };
}

async function map(h: Running, guildId: string, destination: string, channelId: string): Promise<void> {
  const r = await call(h, 'PUT', `/admin/destinations/${guildId}/${destination}`, h.admin, { channel_id: channelId });
  if (r.status !== 200) throw new Error(`mapping ${destination}: ${r.status} ${JSON.stringify(r.json)}`);
}

async function waitUntil(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function rssMb(pid: number | undefined): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round(kb / 1024);
}

// ---------------------------------------------------------------- phases

type Row = Record<string, number | string>;

async function ingest(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  const row: Row = {};
  const guild = SANDBOX_IDS.guild;
  // Baseline 1: the same single-row INSERT, run directly at the same concurrency.
  let raw: Rate;
  if (store.name === 'postgres') {
    const pool = new pg.Pool({ connectionString: store.databaseUrl, max: CONNECTIONS });
    raw = await loop(CONNECTIONS, INGEST_S, () => pool.query(INSERT_SQL, insertParams(deliveryRequest(guild, 'alerts'))));
    await pool.end();
  } else {
    const s = await openStore({ databaseUrl: undefined, dataDir: store.dataDir });
    raw = await loop(CONNECTIONS, INGEST_S, () => s.db.executeQuery(CompiledQuery.raw(INSERT_SQL, insertParams(deliveryRequest(guild, 'alerts')))));
    await s.db.executeQuery(CompiledQuery.raw('truncate deliveries'));
    await s.close();
  }
  if (store.name === 'postgres') await store.sql('truncate deliveries');
  console.log(`  raw INSERT ×${CONNECTIONS}: ${raw.rate.toFixed(0)}/s p50 ${ms(raw.p50)} ms p99 ${ms(raw.p99)} ms`);
  // Baseline 2: a bare Node HTTP server doing that INSERT (PostgreSQL only: PGlite lives in one process).
  let bare: Rate | undefined;
  if (store.name === 'postgres') {
    const server = await spawnChild('test/bench/bare-server.ts', { BENCH_MODE: 'insert', DATABASE_URL: store.databaseUrl ?? '', BENCH_POOL: String(CONNECTIONS) });
    bare = await cannon(`http://127.0.0.1:${server.port}/`, INGEST_S, { method: 'POST', body: () => JSON.stringify(deliveryRequest(guild, 'alerts')) });
    await stop(server.child);
    await store.sql('truncate deliveries');
    console.log(`  bare node + INSERT: ${bare.rate.toFixed(0)}/s p50 ${ms(bare.p50)} ms p99 ${ms(bare.p99)} ms`);
  }
  const h = await startHerald(store, sandbox);
  try {
    await map(h, guild, 'alerts', SANDBOX_IDS.channels.alerts);
    const herald = await cannon(`${h.url}/mcp/deliveries`, INGEST_S, { method: 'POST', headers: h.bridge, body: () => JSON.stringify(deliveryRequest(guild, 'alerts')) });
    console.log(`  Herald accept: ${herald.rate.toFixed(0)}/s p50 ${ms(herald.p50)} ms p99 ${ms(herald.p99)} ms (errors ${herald.errors})`);
    Object.assign(row, {
      'raw INSERT/s': Math.round(raw.rate),
      'raw INSERT p99 ms': ms(raw.p99),
      ...(bare !== undefined ? { 'bare node+INSERT/s': Math.round(bare.rate) } : {}),
      'ingest/s': Math.round(herald.rate),
      'ingest p50 ms': ms(herald.p50),
      'ingest p99 ms': ms(herald.p99),
      'ingest errors': herald.errors,
      'ingest ÷ raw INSERT': ratio(herald.rate, raw.rate),
      ...(bare !== undefined ? { 'ingest ÷ bare node+INSERT': ratio(herald.rate, bare.rate) } : {}),
    });
  } finally {
    await stopHerald(h);
  }
  // Replicas: REPLICAS serve processes on the one database, the same connections spread over them;
  // their floor, REPLICAS bare Node servers doing the INSERT, the connections spread alike.
  if (store.name === 'postgres') {
    await store.sql('truncate deliveries');
    const bares: { child: ChildProcess; port: number }[] = [];
    let bareSpread: Rate;
    try {
      for (let i = 0; i < REPLICAS; i++) bares.push(await spawnChild('test/bench/bare-server.ts', { BENCH_MODE: 'insert', DATABASE_URL: store.databaseUrl ?? '', BENCH_POOL: String(Math.ceil(CONNECTIONS / REPLICAS)) }));
      bareSpread = await cannonSpread(
        bares.map((b) => ({ url: `http://127.0.0.1:${b.port}/`, headers: {} })),
        INGEST_S,
        { method: 'POST', body: () => JSON.stringify(deliveryRequest(guild, 'alerts')) },
      );
    } finally {
      await Promise.all(bares.map((b) => stop(b.child)));
    }
    await store.sql('truncate deliveries');
    console.log(`  bare node + INSERT, ${REPLICAS} processes: ${bareSpread.rate.toFixed(0)}/s p99 ≤ ${ms(bareSpread.p99)} ms`);
    const replicas: Running[] = [];
    try {
      for (let i = 0; i < REPLICAS; i++) replicas.push(await startHerald(store, sandbox));
      const spread = await cannonSpread(
        replicas.map((r) => ({ url: `${r.url}/mcp/deliveries`, headers: r.bridge })),
        INGEST_S,
        { method: 'POST', body: () => JSON.stringify(deliveryRequest(guild, 'alerts')) },
      );
      console.log(`  Herald accept, ${REPLICAS} replicas: ${spread.rate.toFixed(0)}/s p50 ≤ ${ms(spread.p50)} ms p99 ≤ ${ms(spread.p99)} ms (errors ${spread.errors})`);
      Object.assign(row, {
        [`ingest ×${REPLICAS} replicas/s`]: Math.round(spread.rate),
        [`ingest ×${REPLICAS} replicas p99 ms`]: ms(spread.p99),
        [`ingest ×${REPLICAS} replicas errors`]: spread.errors,
        [`ingest ×${REPLICAS} replicas ÷ raw INSERT`]: ratio(spread.rate, raw.rate),
        [`bare node+INSERT ×${REPLICAS} processes/s`]: Math.round(bareSpread.rate),
        [`ingest ×${REPLICAS} replicas ÷ bare node+INSERT ×${REPLICAS}`]: ratio(spread.rate, bareSpread.rate),
      });
    } finally {
      await Promise.all(replicas.map((r) => stopHerald(r)));
    }
  }
  return row;
}

/**
 * Reads: Herald's GET of a delivery and a repeat POST of one (same request_id, same payload), each of
 * a random one of READ_ROWS stored deliveries, vs a bare Node server doing the same primary-key SELECT
 * of the same random ids in its own process (one statement a request: the honest ceiling of a read
 * over HTTP here, which Herald's gathering of reads under load may pass), and Herald's /healthz vs a bare Node server answering it. The measurements alternate in
 * READ_ROUNDS rounds, so the machine's load drifts over all of them alike (PGlite: the bare SELECT runs
 * before and after Herald, which holds the data folder while it runs).
 */
async function reads(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  const guild = SANDBOX_IDS.guild;
  await store.sql('truncate deliveries');
  // READ_ROWS deliveries, read and repeated in random order (a GET of one id over and over would
  // flatter a store, or Herald's gathering of reads, that answers repeats of one id once).
  const stored = Array.from({ length: READ_ROWS }, () => deliveryRequest(guild, 'alerts'));
  const ids = stored.map((r) => String(r['request_id']));
  const pick = (): number => Math.floor(Math.random() * READ_ROWS);
  const readPath = (): string => `/mcp/deliveries/${ids[pick()] ?? ''}`;
  const repeatBody = (): string => JSON.stringify(stored[pick()]);
  // Stored delivered, as a connector's repeat usually finds it (a failed one would be re-driven).
  for (const r of stored) await store.sql(INSERT_SQL, insertParams(r));
  await store.sql(`update deliveries set status = 'delivered', attempts = 1, url = 'https://discord.com/channels/1/2/3'`);
  const totals = new Map<string, { requests: number; seconds: number; p99: number[] }>();
  const add = (name: string, r: Rate, seconds: number): void => {
    const t = totals.get(name) ?? { requests: 0, seconds: 0, p99: [] };
    t.requests += r.rate * seconds;
    t.seconds += seconds;
    t.p99.push(r.p99);
    totals.set(name, t);
  };
  const bareHz = await spawnChild('test/bench/bare-server.ts', { BENCH_MODE: 'healthz' });
  const bareSelect = async (): Promise<{ child: ChildProcess; port: number }> =>
    spawnChild('test/bench/bare-server.ts', { BENCH_MODE: 'select', DATABASE_URL: store.databaseUrl ?? '', BENCH_DATA_DIR: store.dataDir, BENCH_POOL: String(HERALD_POOL) });
  const selectRound = async (port: number): Promise<void> => add('bare SELECT', await cannon(`http://127.0.0.1:${port}/`, READ_S, { path: readPath }), READ_S);
  // Each server answers a second of load first, unmeasured: its pool connected, its code compiled.
  const warm = (url: string, request: Parameters<typeof cannon>[2] = {}): Promise<Rate> => cannon(url, 1, request);
  try {
    let select = store.name === 'pglite' ? await bareSelect() : undefined;
    if (select !== undefined) {
      await warm(`http://127.0.0.1:${select.port}/`, { path: readPath });
      for (let i = 0; i < READ_ROUNDS; i++) await selectRound(select.port);
      await stop(select.child);
    }
    const h = await startHerald(store, sandbox);
    try {
      select = store.name === 'postgres' ? await bareSelect() : undefined;
      if (select !== undefined) await warm(`http://127.0.0.1:${select.port}/`, { path: readPath });
      await warm(`http://127.0.0.1:${bareHz.port}/`);
      await warm(`${h.url}/healthz`);
      await warm(`${h.url}/`, { headers: h.bridge, path: readPath });
      await warm(`${h.url}/mcp/deliveries`, { method: 'POST', headers: h.bridge, body: repeatBody });
      for (let i = 0; i < READ_ROUNDS; i++) {
        add('bare node', await cannon(`http://127.0.0.1:${bareHz.port}/`, READ_S, {}), READ_S);
        add('healthz', await cannon(`${h.url}/healthz`, READ_S, {}), READ_S);
        if (select !== undefined) await selectRound(select.port);
        add('GET', await cannon(`${h.url}/`, READ_S, { headers: h.bridge, path: readPath }), READ_S);
        add('repeat POST', await cannon(`${h.url}/mcp/deliveries`, READ_S, { method: 'POST', headers: h.bridge, body: repeatBody }), READ_S);
      }
      if (select !== undefined) await stop(select.child);
    } finally {
      await stopHerald(h);
    }
    if (store.name === 'pglite') {
      select = await bareSelect();
      await warm(`http://127.0.0.1:${select.port}/`, { path: readPath });
      for (let i = 0; i < READ_ROUNDS; i++) await selectRound(select.port);
      await stop(select.child);
    }
  } finally {
    await stop(bareHz.child);
  }
  const rate = (name: string): number => {
    const t = totals.get(name);
    return t === undefined ? NaN : t.requests / t.seconds;
  };
  const p99 = (name: string): number => ms(Math.max(...(totals.get(name)?.p99 ?? [NaN])));
  for (const name of totals.keys()) console.log(`  ${name}: ${rate(name).toFixed(0)}/s (worst round p99 ${p99(name)} ms)`);
  return {
    'bare node+SELECT/s': Math.round(rate('bare SELECT')),
    'GET/s': Math.round(rate('GET')),
    'GET ÷ bare node+SELECT': ratio(rate('GET'), rate('bare SELECT')),
    'repeat POST/s': Math.round(rate('repeat POST')),
    'repeat POST ÷ bare node+SELECT': ratio(rate('repeat POST'), rate('bare SELECT')),
    'bare node/s': Math.round(rate('bare node')),
    'healthz/s': Math.round(rate('healthz')),
    'healthz ÷ bare node': ratio(rate('healthz'), rate('bare node')),
  };
}

/** One Prometheus gauge's value from a /metrics text (the first series of that name). */
function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m === null ? NaN : Number(m[1]);
}

async function scrape(h: Running): Promise<string> {
  const line = h.procs[0]?.output().split('\n').find((l) => l.includes('"msg":"herald started"'));
  const metrics = line === undefined ? undefined : (JSON.parse(line) as { metrics?: string }).metrics;
  if (metrics === undefined) return '';
  return (await fetch(`${metrics}/metrics`)).text();
}

/** MB, one decimal. */
const mb = (bytes: number): number => Math.round((bytes / 1_048_576) * 10) / 10;

/**
 * Idle cost: `herald serve`'s resident set after start-up and IDLE_S seconds of nothing, with its
 * heap (used, total) and the memory outside it (external, array buffers: PGlite's WASM lives there)
 * from its own /metrics; the target on PostgreSQL is under 150 MB.
 */
async function idle(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  const heap = args.heap === true ? path.dirname(outFile) : undefined;
  if (heap !== undefined) await mkdir(heap, { recursive: true });
  const h = await startHerald(store, sandbox, 1, heap !== undefined ? { NODE_OPTIONS: heapNodeOptions(heap) } : {}, { built: BUILT });
  try {
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const text = await scrape(h);
    const pid = h.procs[0]?.child.pid;
    const rss = await rssMb(pid);
    const row: Row = {
      'idle started by': BUILT ? 'node bin/herald.js (dist/)' : 'node --import tsx src/cli.ts',
      'idle RSS MB': rss,
      'idle heap used MB': mb(gauge(text, 'nodejs_heap_size_used_bytes')),
      'idle heap total MB': mb(gauge(text, 'nodejs_heap_size_total_bytes')),
      'idle external MB': mb(gauge(text, 'nodejs_external_memory_bytes')),
    };
    console.log(`  idle: ${JSON.stringify(row)}`);
    if (heap !== undefined && pid !== undefined) Object.assign(row, await heapReport(pid, heap));
    return row;
  } finally {
    await stopHerald(h);
  }
}

/**
 * Cost over time: a steady load (STEADY_RATE requests/s, half new POSTs and half GETs, 4 connections)
 * for STEADY_S seconds (`--steady=600` for the full 10 minutes), sampling RSS and the event loop's
 * lag (prom-client's nodejs_eventloop_lag_p99_seconds) every 5 s: RSS growth from the first sample
 * after a 10 s warm-up to the last, and the worst lag.
 */
async function steady(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  await store.sql('truncate deliveries');
  const h = await startHerald(store, sandbox);
  try {
    await map(h, SANDBOX_IDS.guild, 'alerts', SANDBOX_IDS.channels.alerts);
    const fixed = deliveryRequest(SANDBOX_IDS.guild, 'alerts');
    if ((await call(h, 'POST', '/mcp/deliveries', h.bridge, fixed)).status !== 202) throw new Error('steady: first POST');
    const samples: { at: number; rss: number; lag: number }[] = [];
    const started = performance.now();
    let done = false;
    const sampler = (async () => {
      while (!done) {
        await new Promise((r) => setTimeout(r, 5_000));
        const text = await scrape(h);
        samples.push({ at: (performance.now() - started) / 1000, rss: mb(gauge(text, 'process_resident_memory_bytes')), lag: gauge(text, 'nodejs_eventloop_lag_p99_seconds') * 1000 });
      }
    })();
    const load = autocannon({
      url: h.url,
      connections: 4,
      overallRate: STEADY_RATE,
      duration: STEADY_S,
      requests: [
        { method: 'POST', path: '/mcp/deliveries', headers: { 'content-type': 'application/json', ...h.bridge }, setupRequest: (req) => ({ ...req, body: JSON.stringify(deliveryRequest(SANDBOX_IDS.guild, 'alerts')) }) },
        { method: 'GET', path: `/mcp/deliveries/${String(fixed['request_id'])}`, headers: h.bridge },
      ],
    });
    const result = await load;
    done = true;
    await sampler;
    const warm = samples.filter((x) => x.at >= 10);
    const first = warm[0] ?? samples[0];
    const last = samples.at(-1);
    const row = {
      'steady s': STEADY_S,
      'steady requests/s': Math.round(result.requests.total / result.duration),
      'steady errors': result.errors + result.timeouts + result.non2xx,
      'steady RSS first MB': first?.rss ?? NaN,
      'steady RSS last MB': last?.rss ?? NaN,
      'steady RSS last ÷ first': ratio(last?.rss ?? NaN, first?.rss ?? NaN),
      'steady worst lag p99 ms': ms(Math.max(...samples.map((x) => x.lag))),
    };
    console.log(`  steady: ${JSON.stringify(row)}`);
    return row;
  } finally {
    await stopHerald(h);
  }
}

/** 25 guilds × 4 destinations = 100 channels, mapped. */
async function hundredChannels(sandbox: DiscordSandbox, h: Running): Promise<{ guildId: string; destination: string; channelId: string }[]> {
  const targets: { guildId: string; destination: string; channelId: string }[] = [];
  const destinations = ['alerts', 'deals', 'digest', 'ops'];
  for (let g = 0; g < 25; g++) {
    const guildId = `8${String(g).padStart(17, '0')}`;
    sandbox.addGuild(guildId, `bench ${g}`);
    for (const [i, destination] of destinations.entries()) {
      const channelId = `7${String(g * 4 + i).padStart(17, '0')}`;
      sandbox.addChannel({ id: channelId, type: 0, name: `${destination}-${g}`, guild_id: guildId });
      targets.push({ guildId, destination, channelId });
    }
  }
  for (const t of targets) await map(h, t.guildId, t.destination, t.channelId);
  return targets;
}

async function drain(store: Store, sandbox: DiscordSandbox, dispatchers: number): Promise<Row> {
  await store.sql('truncate deliveries');
  const h = await startHerald(store, sandbox, dispatchers);
  try {
    const targets = await hundredChannels(sandbox, h);
    const nonces = new Set<string>();
    const requests = Array.from({ length: DRAIN_N }, (_, i) => {
      const t = targets[i % targets.length];
      const r = deliveryRequest(t?.guildId ?? '', t?.destination ?? '');
      nonces.add(deliveryNonce(String(r['request_id'])));
      return r;
    });
    const firstRequest = sandbox.requests.length;
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (next < requests.length) {
          const r = requests[next++];
          const res = await call(h, 'POST', '/mcp/deliveries', h.bridge, r);
          if (res.status !== 202) throw new Error(`drain POST: ${res.status}`);
        }
      }),
    );
    const accepted = (performance.now() - t0) / 1000;
    const floor = DRAIN_N / GLOBAL_PER_S;
    await waitUntil(`${DRAIN_N} messages in the sandbox`, floor * 3 * 1000 + 60_000, () => countDelivered(sandbox, nonces) >= DRAIN_N);
    const seconds = (performance.now() - t0) / 1000;
    const seen = sandbox.requests.slice(firstRequest);
    const global429 = seen.filter((r) => r.status === 429 && r.scope === 'global').length;
    const route429 = seen.filter((r) => r.status === 429 && r.scope !== 'global').length;
    const duplicates = countDuplicates(sandbox, nonces);
    console.log(`  drain ${DRAIN_N} with ${dispatchers} dispatcher(s): ${seconds.toFixed(1)} s (floor ${floor} s), 429s global ${global429} route ${route429}, duplicates ${duplicates}`);
    return {
      [`drain ×${dispatchers} s`]: Math.round(seconds * 10) / 10,
      [`drain ×${dispatchers} ÷ floor`]: ratio(seconds, floor),
      [`drain ×${dispatchers} accepted in s`]: Math.round(accepted * 10) / 10,
      [`drain ×${dispatchers} global 429s`]: global429,
      [`drain ×${dispatchers} route 429s`]: route429,
      [`drain ×${dispatchers} duplicates`]: duplicates,
    };
  } finally {
    await stopHerald(h);
  }
}

function countDelivered(sandbox: DiscordSandbox, nonces: Set<string>): number {
  let n = 0;
  for (const m of sandbox.allMessages()) if (typeof m.nonce === 'string' && nonces.has(m.nonce)) n++;
  return n;
}

function countDuplicates(sandbox: DiscordSandbox, nonces: Set<string>): number {
  const seen = new Set<string>();
  let dups = 0;
  for (const m of sandbox.allMessages()) {
    if (typeof m.nonce !== 'string' || !nonces.has(m.nonce)) continue;
    if (seen.has(m.nonce)) dups++;
    seen.add(m.nonce);
  }
  return dups;
}

/** POST → the message in the sandbox, one post every 100 ms round-robin over 100 channels. */
async function latency(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  // Baseline: the same INSERT alone, one at a time (what an idle accept cannot beat).
  const raw = await openStore({ databaseUrl: store.databaseUrl, dataDir: store.dataDir });
  const rawIdle = await loop(1, 2, () => raw.db.executeQuery(CompiledQuery.raw(INSERT_SQL, insertParams(deliveryRequest(SANDBOX_IDS.guild, 'alerts')))));
  await raw.db.executeQuery(CompiledQuery.raw('truncate deliveries'));
  await raw.close();
  const h = await startHerald(store, sandbox);
  try {
    const targets = await hundredChannels(sandbox, h);
    const n = quick ? 50 : 200;
    const accepted = new Map<string, number>();
    const posts: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = targets[i % targets.length];
      const r = deliveryRequest(t?.guildId ?? '', t?.destination ?? '');
      // From the POST's start: an upper bound of 202 → receipt (the send may beat the 202 back).
      const sent = Date.now();
      const res = await call(h, 'POST', '/mcp/deliveries', h.bridge, r);
      if (res.status !== 202) throw new Error(`latency POST: ${res.status}`);
      posts.push(Date.now() - sent);
      accepted.set(deliveryNonce(String(r['request_id'])), sent);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const nonces = new Set(accepted.keys());
    await waitUntil('every latency post in the sandbox', 60_000, () => countDelivered(sandbox, nonces) >= n);
    const lat = sandbox
      .allMessages()
      .flatMap((m) => (typeof m.nonce === 'string' && accepted.has(m.nonce) ? [Date.parse(m.timestamp) - (accepted.get(m.nonce) ?? 0)] : []))
      .sort((a, b) => a - b);
    posts.sort((a, b) => a - b);
    console.log(`  POST → sandbox: p50 ${percentile(lat, 50)} ms p99 ${percentile(lat, 99)} ms (${lat.length} posts); idle accept p50 ${percentile(posts, 50)} ms vs raw INSERT p50 ${ms(rawIdle.p50)} ms`);
    return {
      'POST→sandbox p50 ms': percentile(lat, 50),
      'POST→sandbox p99 ms': percentile(lat, 99),
      'idle accept p50 ms': percentile(posts, 50),
      'idle raw INSERT p50 ms': ms(rawIdle.p50),
    };
  } finally {
    await stopHerald(h);
  }
}

/** Resident memory of `herald serve` after GETs, with 100,000 stored deliveries vs none. */
async function memory(store: Store, sandbox: DiscordSandbox): Promise<Row> {
  const measure = async (): Promise<number> => {
    const h = await startHerald(store, sandbox, 1, {}, { built: BUILT });
    try {
      const ids = await call(h, 'GET', '/healthz', {});
      if (ids.status !== 200) throw new Error('healthz');
      await cannon(`${h.url}/mcp/deliveries/${'0'.repeat(64)}`, 2, { headers: h.bridge });
      return await rssMb(h.procs[0]?.child.pid);
    } finally {
      await stopHerald(h);
    }
  };
  await store.sql('truncate deliveries');
  const empty = await measure();
  await store.sql(
    `insert into deliveries (request_id, kind, target, body, payload_hash, status, created_at, next_attempt_at, attempts, channel_id, message_id, url)
     select lpad(to_hex(g), 64, '0'), 'post', '{"guild_id":"234567890123456789","destination":"alerts"}',
       json_build_object('content', 'stored delivery ' || g), md5(g::text) || md5(g::text), 'delivered', now(), now(), 1,
       '345678901234567890', (1000000000000000000 + g)::text, 'https://discord.com/channels/1/2/3'
     from generate_series(1, ${STORED}) g`,
  );
  const full = await measure();
  console.log(`  RSS: ${empty} MB empty, ${full} MB with ${STORED} stored`);
  return { 'RSS empty MB': empty, [`RSS ${STORED} stored MB`]: full, 'RSS stored ÷ empty': ratio(full, empty) };
}

// ---------------------------------------------------------------- main

/** Each ratio's baseline (its floor or ceiling, measured in the same run) and the target it is held to. */
const FLOORS: Record<string, string> = {
  'GET ÷ bare node+SELECT': 'a bare Node server (own process) doing the same primary-key SELECT through a pg pool of 16 (PGlite: the store, opened as Herald opens it); target ≥ 0.8',
  'repeat POST ÷ bare node+SELECT': 'the same bare SELECT server; target ≥ 0.8 (a repeat is one statement)',
  'healthz ÷ bare node': 'a bare Node server answering 200 {"status":"ok"}; target ≥ 0.4',
  'ingest ÷ raw INSERT': "the same single-row INSERT run directly at 32 connections; target ≥ 1.0 on PostgreSQL, p99 < 50 ms",
  'ingest ÷ bare node+INSERT': 'a bare Node server doing that INSERT per request',
  [`ingest ×${REPLICAS} replicas ÷ bare node+INSERT ×${REPLICAS}`]: `${REPLICAS} bare Node servers doing that INSERT, the same connections spread over them`,
  [`ingest ×${REPLICAS} replicas ÷ raw INSERT`]: `the same raw INSERT; ${REPLICAS} serve processes on one database, the 32 connections spread over them; target ≥ 1.0, p99 < 50 ms`,
  'drain ×N ÷ floor': 'N deliveries over 100 channels at 50/s global: N/50 s; target ≤ 1.1',
  'slack ÷ floor': "Slack's 1 message/s per channel over 20 channels; target ≤ 1.1",
  'idle RSS MB': 'target < 150 MB on PostgreSQL',
  'steady RSS last ÷ first': 'flat (≈ 1.0) over the steady load',
  'RSS stored ÷ empty': 'target ≤ 1.2',
};

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** The commit measured: read at the start (a commit made during the run is not what it measured). */
const commit = gitCommit();

const machine = {
  cpus: os.cpus().length,
  cpu_model: os.cpus()[0]?.model ?? 'unknown',
  memory_mb: Math.round(os.totalmem() / 1_048_576),
  node: process.version,
  loadavg_start: os.loadavg().map((x) => Math.round(x * 100) / 100),
};

/** Memory is measured on the compiled CLI, the way operators run Herald, unless --tsx. */
const BUILT = args.tsx !== true;

/** Newest modification time of the files under `dir` (0 when it does not exist). */
async function newest(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const times = await Promise.all(entries.filter((e) => e.isFile()).map(async (e) => (await stat(path.join(e.parentPath, e.name))).mtimeMs));
  return Math.max(0, ...times);
}

/** dist/ as `npm start` would run it: rebuilt when a source is newer than the compiled CLI. */
async function buildIfStale(): Promise<void> {
  const built = await stat(path.join(ROOT, 'dist/src/cli.js')).then((s) => s.mtimeMs, () => 0);
  if (built >= Math.max(await newest(path.join(ROOT, 'src')), await newest(path.join(ROOT, 'openapi')))) return;
  console.log('dist/ is older than src/: npm run build');
  execFileSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: 'inherit' });
}

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`machine: ${JSON.stringify(machine)}, commit ${commit}`);
  if (BUILT && (only.has('idle') || only.has('memory'))) await buildIfStale();
  const sandbox = await new DiscordSandbox({ routeLimit: { limit: 5, windowMs: 5_000 }, globalLimit: { limit: GLOBAL_PER_S, windowMs: 1_000 } }).start();
  cleanups.push(() => sandbox.close());
  const results: Record<string, Row> = { postgres: {}, pglite: {} };
  for (const kind of ['postgres', 'pglite'] as const) {
    console.log(`== ${kind}`);
    const store = kind === 'postgres' ? await postgresStore() : await pgliteStore();
    try {
      const row = results[kind] ?? {};
      if (only.has('reads')) Object.assign(row, await reads(store, sandbox));
      if (only.has('ingest')) Object.assign(row, await ingest(store, sandbox));
      if (only.has('latency')) Object.assign(row, await latency(store, sandbox));
      if (only.has('drain') && kind === 'postgres') {
        Object.assign(row, await drain(store, sandbox, 1));
        Object.assign(row, await drain(store, sandbox, 3));
      }
      if (only.has('slack') && kind === 'postgres') {
        Object.assign(
          row,
          await slackDrain(
            {
              discord: sandbox,
              connections: CONNECTIONS,
              truncate: async () => void (await store.sql('truncate deliveries')),
              start: async (env, processes) => {
                const h = await startHerald(store, sandbox, processes, env);
                return { url: h.url, bridge: h.bridge, admin: h.admin, stop: () => stopHerald(h) };
              },
            },
            SLACK_N,
          ),
        );
      }
      if (only.has('irc') && kind === 'postgres') Object.assign(row, await ircFlood({ connections: CONNECTIONS, truncate: async () => void (await store.sql('truncate deliveries')), start: async (env) => { const h = await startHerald(store, sandbox, 1, env); return { url: h.url, bridge: h.bridge, output: () => h.procs.map((p) => p.output()).join(''), stop: () => stopHerald(h) }; } }, quick));
      if (only.has('idle')) Object.assign(row, await idle(store, sandbox));
      if (only.has('steady')) Object.assign(row, await steady(store, sandbox));
      if (only.has('memory')) Object.assign(row, await memory(store, sandbox));
      if (only.has('archive')) Object.assign(row, await archiveQueryPhase(store.databaseUrl, store.dataDir, quick ? BENCH_ITEMS / 50 : BENCH_ITEMS, quick ? 5 : 100));
      if (only.has('hear') && !(quick && kind === 'pglite')) Object.assign(row, await hearLatency({ store: () => (kind === 'postgres' ? postgresStore() : pgliteStore()), start: async (s, sb, env) => { const h = await startHerald(s, sb, 1, env); return { url: h.url, bridge: h.bridge, admin: h.admin, stop: () => stopHerald(h) }; } }, quick ? 30 : 200));
      if (only.has('scrape') && kind === 'postgres') Object.assign(row, await scrapePhase({ start: async (sb, env) => { const h = await startHerald(store, sb, 1, env); return { url: h.url, admin: h.admin, output: () => h.procs[0]?.output() ?? '', stop: () => stopHerald(h) }; }, databaseUrl: store.databaseUrl }, quick ? 2_000 : 20_000, quick ? 200 : 600));
      if (only.has('vacuum') && store.databaseUrl !== undefined) Object.assign(row, await vacuumPhase(store.databaseUrl, quick));
      if (only.has('identities')) Object.assign(row, await identitiesIsolation({ truncate: async () => void (await store.sql('truncate deliveries')), start: async (sb, env) => { const h = await startHerald(store, sb, kind === 'postgres' ? 2 : 1, env); return { url: h.url, bridge: h.bridge, admin: h.admin, stop: () => stopHerald(h) }; } }, 100, quick ? 200 : 400));
      if (only.has('slack-identities') && kind === 'postgres') {
        const harness = {
          discord: sandbox,
          connections: CONNECTIONS,
          truncate: async () => void (await store.sql('truncate deliveries')),
          start: async (env: Record<string, string>, processes: number) => {
            const h = await startHerald(store, sandbox, processes, env);
            return { url: h.url, bridge: h.bridge, admin: h.admin, stop: () => stopHerald(h) };
          },
        };
        Object.assign(row, await slackIdentitiesIsolation(harness, quick ? 100 : 200, quick ? 200 : 400));
      }
      if (only.has('twins')) Object.assign(row, await twinsDrain({ processes: kind === 'postgres' ? 2 : 1, truncate: async () => void (await store.sql('truncate deliveries')), start: async (sb, processes) => { const h = await startHerald(store, sb, processes); return { url: h.url, bridge: h.bridge, admin: h.admin, stop: () => stopHerald(h) }; } }, 100));
    } finally {
      await store.close();
    }
  }
  const names = [...new Set([...Object.keys(results['postgres'] ?? {}), ...Object.keys(results['pglite'] ?? {})])];
  const table = names.map((n) => `| ${n} | ${results['postgres']?.[n] ?? '–'} | ${results['pglite']?.[n] ?? '–'} |`);
  console.log(['', '| measure | PostgreSQL | PGlite |', '|---|---|---|', ...table].join('\n'));
  const report = {
    at: new Date().toISOString(),
    command: `npm run bench -- ${argv.join(' ')}`.trim(),
    quick,
    commit,
    machine: { ...machine, loadavg_end: os.loadavg().map((x) => Math.round(x * 100) / 100) },
    floors: FLOORS,
    results,
  };
  await mkdir(path.dirname(outFile), { recursive: true });
  await writeFile(outFile, JSON.stringify(report, null, 2));
  console.log(`\nwritten: ${outFile} (the run took ${formatDuration((performance.now() - started) / 1000)})`);
}

main()
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
