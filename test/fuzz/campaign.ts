import { UNKNOWN_FILE } from '../../src/modules/files/files.service.js';
import http from 'node:http';
import fc from 'fast-check';
import WebSocket from 'ws';
import { cardLength, deliveryNonce, type Card } from '../../src/modules/deliveries/delivery.js';
import { unstorableField } from '../../src/infra/contract/storable.js';
import { SANDBOX_IDS } from '../../src/platforms/discord/sandbox/ids.js';
import { answerProblems, contractApi } from '../support/client.js';
import { fuzzRequest, type CategoryGroup, type FuzzRequest } from './arbitraries.js';
import { startTarget, type Target } from './target.js';

export type ViolationKind = 'crash' | '5xx' | 'contract' | 'timeout' | 'connection' | 'write-on-refusal' | 'validity' | 'exactly-once' | 'health';

export interface Violation {
  kind: ViolationKind;
  /** Index of the request in the seeded sequence (0-based). */
  index: number;
  request: FuzzRequest | undefined;
  detail: string;
}

export interface FuzzOptions {
  seed: number;
  runs: number;
  groups?: readonly CategoryGroup[];
  databaseUrl?: string | undefined;
  /** One request's limit: longer is a hang. */
  timeoutMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

export type StatusClass = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'error';

export interface FuzzReport {
  seed: number;
  runs: number;
  sent: number;
  durationMs: number;
  byCategory: Record<string, Record<StatusClass, number>>;
  violations: Violation[];
}

export interface Answer {
  status: number;
  contentType: string | null;
  text: string;
}

/** The request body as sent. */
function bodyOf(r: FuzzRequest): string | undefined {
  if (r.body === undefined) return undefined;
  if (typeof r.body === 'string') return r.body;
  return `{"request_id":"${'a'.repeat(Math.max(0, r.body.oversize - 18))}"}`;
}

/**
 * Run one seeded campaign: start Herald, send `runs` generated requests one at a time, check every
 * answer, stop Herald. Violations are collected, not thrown, so one run reports all of them.
 */
export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const requests = fc.sample(fuzzRequest(options.groups), { seed: options.seed, numRuns: options.runs });
  const report: FuzzReport = { seed: options.seed, runs: options.runs, sent: 0, durationMs: 0, byCategory: {}, violations: [] };
  const violate = (kind: ViolationKind, index: number, request: FuzzRequest | undefined, detail: string): void => {
    report.violations.push({ kind, index, request, detail });
    log(`  ✗ #${index} ${kind}: ${detail.slice(0, 300)}${request !== undefined ? `\n      ${describe(request)}` : ''}`);
  };
  const contract = await contractApi();
  let life = await begin(options.databaseUrl, log);
  let restarts = 0;
  const died = (index: number, request: FuzzRequest | undefined): void => {
    const t = life.target;
    violate('crash', index, request, `herald exited (${String(t.proc.child.exitCode ?? t.proc.child.signalCode)}); its last output:\n${t.proc.output().trim().split('\n').slice(-12).join('\n')}`);
  };
  /** After a crash: a fresh Herald on a fresh database, so the rest of the sequence still runs. */
  const restart = async (): Promise<boolean> => {
    await end(life);
    if (++restarts > MAX_RESTARTS) return false;
    life = await begin(options.databaseUrl, log);
    return true;
  };
  try {
    for (const [index, request] of requests.entries()) {
      let watch: Awaited<ReturnType<typeof observe>>;
      try {
        watch = await observe(life, request);
      } catch (err) {
        // Herald cannot be read before this request: something earlier brought it down.
        if (!(await exitedWithin(life.target, 2_000))) {
          violate('health', index, request, `reading state before the request failed: ${String(err)}`);
          continue;
        }
        died(index - 1, requests[index - 1]);
        if (!(await restart())) break;
        watch = await observe(life, request);
      }
      const answer = await send(life.target, request, life.agents, timeoutMs).catch((err: unknown) => err as Error);
      report.sent += 1;
      const cls = statusClass(answer);
      const row = (report.byCategory[request.category] ??= { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, timeout: 0, error: 0 });
      row[cls] += 1;
      // A gateway frame is handled after the session closes; an error may be the process dying.
      if (await exitedWithin(life.target, request.server === 'gateway' ? 300 : answer instanceof Error ? 500 : 0)) {
        died(index, request);
        if (!(await restart())) break;
        continue;
      }
      if (answer instanceof Error) {
        const big = typeof request.body === 'object' && request.body.oversize > 1_000_000;
        if (cls === 'timeout') violate('timeout', index, request, answer.message);
        else if (!big) violate('connection', index, request, answer.message);
        continue;
      }
      if (request.server === 'gateway') continue;
      if (answer.status >= 500) violate('5xx', index, request, `${answer.status} ${answer.text.slice(0, 300)}`);
      const pathname = request.path.split('?')[0] ?? '';
      if (request.server === 'herald' && inContract(contract, pathname)) {
        for (const problem of await answerProblems(request.method, pathname, answer.status, answer.contentType, answer.text)) violate('contract', index, request, problem);
      }
      if (request.server === 'sandbox' && request.method === 'POST' && pathname === '/sandbox/api/interactions' && !/^application\/json/.test(answer.contentType ?? '')) {
        violate('contract', index, request, `the control route answered ${answer.status} with ${answer.contentType ?? 'no content type'}`);
      }
      await checkDelivery(life, request, answer, contract, (kind, detail) => violate(kind, index, request, detail));
      if (answer.status >= 400 && answer.status < 500) {
        for (const problem of await watch.changes()) violate('write-on-refusal', index, request, problem);
      }
      if (index % 50 === 49) {
        const health = await send(life.target, { category: 'health', server: 'herald', method: 'GET', path: '/healthz', auth: 'none', headers: {} }, life.agents, timeoutMs).catch((e: unknown) => e as Error);
        if (health instanceof Error || health.status !== 200) violate('health', index, undefined, `/healthz: ${health instanceof Error ? health.message : health.status}`);
        log(`  ${index + 1}/${requests.length} sent, ${report.violations.length} violations`);
      }
    }
    if (life.target.alive()) {
      // Nothing refused may ever reach Discord, even once the dispatcher has caught up.
      await new Promise((r) => setTimeout(r, 1_000));
      const state = await getJson(life.target.sandboxUrl, '/sandbox/api/state', life.agents.sandbox);
      const nonces = new Set(((state as { messages?: { nonce?: unknown }[] }).messages ?? []).map((m) => String(m.nonce)));
      for (const id of life.refused) {
        if (life.accepted.has(id)) continue;
        if (nonces.has(deliveryNonce(id))) violate('write-on-refusal', -1, undefined, `a message was sent for refused request_id ${id}`);
        const get = await send(life.target, { category: 'check', server: 'herald', method: 'GET', path: `/mcp/deliveries/${id}`, auth: 'bridge', headers: {} }, life.agents, timeoutMs);
        if (get.status !== 404) violate('write-on-refusal', -1, undefined, `refused request_id ${id} is stored: ${get.status} ${get.text.slice(0, 200)}`);
      }
    }
  } finally {
    await end(life);
    report.durationMs = Date.now() - started;
  }
  return report;
}

/** Crashes survived (Herald restarted) before a campaign gives up. */
const MAX_RESTARTS = 10;

/** One Herald process and what the checks remember about it. */
export interface Life {
  target: Target;
  agents: { herald: http.Agent; sandbox: http.Agent };
  /** request_id → the stored kind/target/body/created_at, once Herald accepted it. */
  accepted: Map<string, string>;
  /** request_ids refused and never accepted: nothing may ever be sent for them. */
  refused: Set<string>;
}

export async function begin(databaseUrl: string | undefined, log: (line: string) => void): Promise<Life> {
  const target = await startTarget({ databaseUrl });
  log(`herald ${target.url} (sandbox ${target.sandboxUrl}, ${databaseUrl !== undefined ? 'PostgreSQL' : 'PGlite'})`);
  const life: Life = {
    target,
    agents: { herald: new http.Agent({ keepAlive: true, maxSockets: 1 }), sandbox: new http.Agent({ keepAlive: true, maxSockets: 1 }) },
    accepted: new Map(),
    refused: new Set(),
  };
  try {
    await setUp(target);
  } catch (err) {
    await end(life);
    throw err;
  }
  return life;
}

export async function end(life: Life): Promise<void> {
  life.agents.herald.destroy();
  life.agents.sandbox.destroy();
  await life.target.stop();
}

/** Whether the process has exited, waiting up to `ms` for it. */
export async function exitedWithin(target: Target, ms: number): Promise<boolean> {
  if (!target.alive()) return true;
  if (ms <= 0) return false;
  await Promise.race([target.proc.exited, new Promise((r) => setTimeout(r, ms))]);
  return !target.alive();
}

/** Map #alerts and register the sandbox user, so valid posts and DMs get delivered. */
async function setUp(target: Target): Promise<void> {
  const put = await fetch(`${target.url}/admin/destinations/${SANDBOX_IDS.guild}/alerts`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${target.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ channel_id: SANDBOX_IDS.channels.alerts }),
  });
  if (put.status !== 200) throw new Error(`mapping #alerts failed: ${put.status} ${await put.text()}`);
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${target.sandboxUrl}/sandbox/api/interactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: SANDBOX_IDS.user, guildId: SANDBOX_IDS.guild, command: 'agent', subcommand: 'register' }),
    });
    if (res.status === 200) return;
    // The gateway may still be registering its commands.
    if (attempt > 100) throw new Error(`registering the sandbox user failed: ${res.status} ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function statusClass(answer: Answer | Error): StatusClass {
  if (answer instanceof Error) return /no answer/.test(answer.message) ? 'timeout' : 'error';
  // A gateway session that ended (101 Switching Protocols, then a close) counts as answered.
  if (answer.status === 101) return '2xx';
  return `${Math.min(5, Math.floor(answer.status / 100))}xx` as StatusClass;
}

/** Herald's API: everything under /mcp/ and /admin/, and the contract's other paths (the probes). */
function inContract(contract: Awaited<ReturnType<typeof contractApi>>, pathname: string): boolean {
  return pathname.startsWith('/mcp/') || pathname.startsWith('/admin/') || contract.matchOperation({ method: 'GET', path: pathname, headers: {} }) !== undefined;
}

/** State a refused request must leave as it was: read before it is sent, compared after. */
export async function observe({ target, agents }: Life, request: FuzzRequest): Promise<{ changes(): Promise<string[]> }> {
  const reads: (() => Promise<unknown>)[] = [];
  if (request.path.startsWith('/admin/destinations/')) reads.push(() => getJson(target.url, '/admin/destinations', agents.herald, target.adminToken));
  if (request.path.startsWith('/mcp/pair/redeem') || request.path.startsWith('/sandbox/api/interactions')) reads.push(() => getJson(target.url, '/mcp/recipients', agents.herald, target.bridgeToken));
  reads.push(() => target.rowCounts());
  const snapshot = async () => JSON.stringify(await Promise.all(reads.map((r) => r())));
  const before = await snapshot();
  return {
    async changes() {
      const after = await snapshot();
      return after === before ? [] : [`state changed: before ${before.slice(0, 300)} after ${after.slice(0, 300)}`];
    },
  };
}

/**
 * POST /mcp/deliveries: the answer agrees with the contract's verdict on the request (valid →
 * 202 or 422, invalid → 400), `existing` tells the truth, and a refused request_id stays unknown.
 */
async function checkDelivery(
  { target, accepted, refused }: Life,
  request: FuzzRequest,
  answer: Answer,
  contract: Awaited<ReturnType<typeof contractApi>>,
  violate: (kind: ViolationKind, detail: string) => void,
): Promise<void> {
  if (request.server !== 'herald' || request.method !== 'POST' || request.path.split('?')[0] !== '/mcp/deliveries' || request.auth !== 'bridge') return;
  if (answer.status === 429) return;
  const raw = bodyOf(request) ?? '';
  if (Buffer.byteLength(raw) > 65_536) {
    if (answer.status !== 413) violate('validity', `a ${Buffer.byteLength(raw)}-byte body answered ${answer.status}, not 413`);
    return;
  }
  let body: unknown;
  let parsed = true;
  try {
    // raw-body decodes UTF-8 with iconv-lite, which drops a byte order mark.
    body = JSON.parse(raw.replace(/^\ufeff/, ''));
  } catch {
    parsed = false;
  }
  const id = typeof body === 'object' && body !== null && typeof (body as { request_id?: unknown }).request_id === 'string' ? (body as { request_id: string }).request_id : undefined;
  const wellFormedId = id !== undefined && /^[0-9a-f]{64}$/.test(id) ? id : undefined;
  if (!parsed) {
    if (answer.status !== 400 || answer.text !== '{"error":"request body must be valid JSON"}') violate('validity', `a body that is not JSON answered ${answer.status} ${answer.text.slice(0, 200)}`);
    return;
  }
  const verdict = contract.validateRequest({ method: 'POST', path: '/mcp/deliveries', body, headers: { 'content-type': 'application/json' }, query: {} });
  const card = (body as { body?: { card?: unknown } } | null)?.body?.card;
  // Text no store can hold (U+0000, a lone surrogate) is refused like the contract's own checks: the one input gate.
  const storable = unstorableField({}, body) === undefined;
  const valid = verdict.valid && storable && !(typeof card === 'object' && card !== null && cardLength(card as Card) > 6000);
  // Which files Herald holds is state, not shape: an attachment naming a file never uploaded is
  // refused with the reason the contract gives for it (openapi/files.yaml), never queued.
  const unknownFile = answer.text === JSON.stringify({ error: UNKNOWN_FILE });
  if (valid && answer.status === 400 && !unknownFile) violate('validity', `a request valid by the contract was refused: ${answer.text.slice(0, 200)}`);
  if (!valid && answer.status !== 400) violate('validity', `a request invalid by the contract answered ${answer.status} (${storable ? `${verdict.errors?.[0]?.instancePath ?? ''} ${verdict.errors?.[0]?.message ?? 'card total'}` : 'unstorable text'})`);
  if (wellFormedId === undefined) return;
  if (answer.status === 202) {
    const json = JSON.parse(answer.text) as { existing: boolean; state: Record<string, unknown> };
    const stored = JSON.stringify([json.state['kind'], json.state['target'], json.state['body'], json.state['created_at']]);
    const before = accepted.get(wellFormedId);
    if (before === undefined && json.existing) violate('exactly-once', `a new request_id answered existing: true`);
    if (before !== undefined && !json.existing) violate('exactly-once', `a known request_id answered existing: false`);
    if (before !== undefined && before !== stored) violate('exactly-once', `the stored request changed: ${before.slice(0, 200)} → ${stored.slice(0, 200)}`);
    accepted.set(wellFormedId, stored);
    return;
  }
  if (answer.status === 422 && !accepted.has(wellFormedId)) violate('exactly-once', `422 for a request_id never accepted`);
  if (answer.status >= 400 && answer.status < 500) {
    const get = await send(target, { category: 'check', server: 'herald', method: 'GET', path: `/mcp/deliveries/${wellFormedId}`, auth: 'bridge', headers: {} }, undefined, 10_000);
    const before = accepted.get(wellFormedId);
    if (before === undefined) {
      refused.add(wellFormedId);
      if (get.status !== 404) violate('write-on-refusal', `refused, yet stored: ${get.status} ${get.text.slice(0, 200)}`);
    } else if (get.status === 200) {
      const s = JSON.parse(get.text) as Record<string, unknown>;
      const now = JSON.stringify([s['kind'], s['target'], s['body'], s['created_at']]);
      if (now !== before) violate('write-on-refusal', `refused, yet the stored request changed: ${before.slice(0, 200)} → ${now.slice(0, 200)}`);
    }
  }
}

async function getJson(base: string, path: string, agent: http.Agent, token?: string): Promise<unknown> {
  const res = await rawRequest(`${base}${path}`, 'GET', token !== undefined ? { authorization: `Bearer ${token}` } : {}, undefined, agent, 10_000);
  return JSON.parse(res.text) as unknown;
}

/** Send one generated request (an HTTP request, or a gateway WebSocket session). */
export async function send(target: Target, request: FuzzRequest, agents: { herald: http.Agent; sandbox: http.Agent } | undefined, timeoutMs: number): Promise<Answer> {
  if (request.server === 'gateway') return gatewaySession(target, request.frames ?? [], timeoutMs);
  const base = request.server === 'sandbox' ? target.sandboxUrl : target.url;
  const headers: Record<string, string> = { ...request.headers };
  if (headers['origin'] === 'SELF') headers['origin'] = target.sandboxUrl;
  const auth = {
    bridge: `Bearer ${target.bridgeToken}`,
    admin: `Bearer ${target.adminToken}`,
    none: undefined,
    wrong: `Bearer ${'W'.repeat(43)}`,
    malformed: `bearer ${target.bridgeToken}`,
  }[request.auth];
  if (auth !== undefined) headers['authorization'] = auth;
  return rawRequest(`${base}${request.path}`, request.method, headers, bodyOf(request), agents?.[request.server], timeoutMs);
}

export function rawRequest(url: string, method: string, headers: Record<string, string>, body: string | undefined, agent: http.Agent | undefined, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // Framed explicitly: Node frames a GET's or OPTIONS's body with neither Content-Length nor chunks.
    const framed = body !== undefined ? { ...headers, 'content-length': String(Buffer.byteLength(body)) } : headers;
    // The path is sent as generated: a URL object would resolve `%2e%2e` and friends first.
    const origin = /^(http:\/\/[^/]+)(.*)$/.exec(url);
    const { hostname, port } = new URL(origin?.[1] ?? url);
    const options = { method, hostname, port, path: origin?.[2] || '/', headers: framed, ...(agent !== undefined ? { agent } : {}) };
    const req = http.request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'] ?? null, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Open the sandbox gateway, send the frames after HELLO, and see what comes back. */
function gatewaySession(target: Target, frames: string[], timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${target.sandboxUrl.replace(/^http/, 'ws')}/gateway`);
    const received: string[] = [];
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    ws.on('message', (data: Buffer) => {
      received.push(data.toString().slice(0, 100));
      if (received.length === 1) {
        for (const f of frames) ws.send(f);
        setTimeout(() => ws.close(), 100);
      }
    });
    ws.on('close', (code) => {
      clearTimeout(timer);
      resolve({ status: 101, contentType: null, text: `${code} ${received.join(' ')}` });
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** The summary: requests by category and status class, then violations by kind. */
export function formatReport(report: FuzzReport): string {
  const classes: StatusClass[] = ['2xx', '3xx', '4xx', '5xx', 'timeout', 'error'];
  const rows = Object.entries(report.byCategory).sort(([a], [b]) => a.localeCompare(b));
  const total: Record<StatusClass, number> = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, timeout: 0, error: 0 };
  for (const [, r] of rows) for (const c of classes) total[c] += r[c];
  const table: string[][] = [['category', 'requests', ...classes]];
  for (const [name, r] of [...rows, ['total', total] as const]) table.push([name, String(classes.reduce((n, c) => n + r[c], 0)), ...classes.map((c) => String(r[c]))]);
  const widths = table[0]?.map((_, i) => Math.max(...table.map((row) => row[i]?.length ?? 0))) ?? [];
  const line = (row: string[]) => row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ');
  const out = [`seed ${report.seed}: ${report.sent}/${report.runs} requests in ${(report.durationMs / 1000).toFixed(1)} s`, '', line(table[0] ?? [])];
  for (const row of table.slice(1)) out.push(line(row));
  const byKind = new Map<string, number>();
  for (const v of report.violations) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + 1);
  out.push('', `violations: ${report.violations.length}${byKind.size > 0 ? ` (${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ')})` : ''}`);
  const shown = new Set<string>();
  for (const v of report.violations) {
    // One example per kind and category.
    const key = `${v.kind} ${v.request?.category ?? ''}`;
    if (shown.has(key)) continue;
    shown.add(key);
    out.push(`  ${v.kind} at request #${v.index}: ${v.detail.split('\n')[0]?.slice(0, 240) ?? ''}`);
    if (v.request !== undefined) out.push(`    request: ${describe(v.request)}`);
  }
  if (report.violations.length > 0) out.push('', `replay: npm run fuzz -- --seed ${report.seed} --runs ${report.runs}`);
  return out.join('\n');
}

function describe(r: FuzzRequest): string {
  const body = r.body === undefined ? '' : typeof r.body === 'string' ? ` body ${JSON.stringify(r.body.length > 200 ? `${r.body.slice(0, 200)}…(${r.body.length} chars)` : r.body)}` : ` body of ${r.body.oversize} bytes`;
  const headers = Object.keys(r.headers).length > 0 ? ` headers ${JSON.stringify(r.headers)}` : '';
  const frames = r.frames !== undefined ? ` frames ${JSON.stringify(r.frames).slice(0, 200)}` : '';
  return `${r.method} ${r.server} ${r.path.slice(0, 200)} auth=${r.auth}${headers}${body}${frames}`;
}
