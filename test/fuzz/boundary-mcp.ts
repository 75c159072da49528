import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createBridgeClient } from '../../src/client/bridge-client.js';
import { unstorableField } from '../../src/infra/contract/storable.js';
import { createLogger } from '../../src/infra/log.js';
import { createMcpServer } from '../../src/mcp/server.js';
import { storeRecords } from '../../src/mcp/state.js';
import { mcpTools } from '../../src/mcp/tools.js';
import { callTool, mcpClient } from '../support/mcp.js';
import { boundaries, sampleOf, validBy, type Boundary, type Schema } from './boundary-values.js';
import { bodyFields, fieldLabel, fieldName, httpBoundaryPass, SHORT, withAt, type BoundaryKind, type BoundaryReport, type Field } from './boundary.js';
import { begin, end, exitedWithin, observe, type Life } from './campaign.js';

/**
 * The boundary pass over `herald mcp`'s tools (every module's, src/mcp/tools.ts): each argument's
 * boundary values (test/fuzz/boundary-values.ts) put in alone, the other arguments valid, through
 * the real MCP server (src/mcp/server.ts, over an in-memory transport) whose bridge is the running
 * Herald. Never a tool failure ("something went wrong"), never a 5xx from the bridge, never a hang;
 * an argument the input schema refuses refused naming it before the bridge is asked; nothing
 * written when the tool answers an error. Then `runBoundary` runs both passes on one Herald.
 */

const FAILED = 'Something went wrong inside the Herald MCP server';

export interface McpPassOptions {
  timeoutMs?: number;
  short?: boolean;
  only?: (name: string) => boolean;
  log?: (line: string) => void;
}

/** Arguments to start from: the required ones, from the schema; a wait's timeout 0. */
function startingArgs(schema: Schema, replayKey: string | undefined): Record<string, unknown> {
  const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
  const required = (schema['required'] ?? []) as string[];
  const out: Record<string, unknown> = {};
  for (const [k, s] of Object.entries(properties)) {
    if (/timeout/i.test(k)) out[k] = 0;
    else if (required.includes(k) || k === replayKey) out[k] = sampleOf(s);
  }
  return out;
}

let calls = 0;

/** A new value for the tool's replay key, so a call is never answered as a replay of an earlier one. */
function freshKey(args: Record<string, unknown>, key: string | undefined, schema: Schema, field: Field | undefined): Record<string, unknown> {
  if (key === undefined || !(key in args) || field?.place[0] === key) return args;
  const keySchema = ((schema['properties'] ?? {}) as Record<string, Schema>)[key] ?? {};
  const fresh = createHash('sha256').update(`boundary tool ${++calls}`).digest('hex');
  for (const v of [fresh, `boundary-${calls}`]) if (validBy(keySchema, { json: v })) return { ...args, [key]: v };
  return args;
}

export async function mcpBoundaryPass(life: () => Life, report: BoundaryReport, options: McpPassOptions = {}): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const log = options.log ?? (() => undefined);
  const stateDir = await mkdtemp(path.join(tmpdir(), 'herald-fuzz-mcp-'));
  // What the bridge answered during one call, and what the MCP server logged as errors.
  let answers: { status: number; route: string }[] = [];
  let errors: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const url = input instanceof Request ? input.url : String(input);
    answers.push({ status: res.status, route: `${input instanceof Request ? input.method : (init?.method ?? 'GET')} ${new URL(url).pathname}` });
    return res;
  };
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.includes('"level":50')) errors.push(line.slice(0, 300));
      done();
    },
  });
  const target = life().target;
  const server = createMcpServer({
    bridge: createBridgeClient({ baseUrl: target.url, token: target.bridgeToken, retries: 0, fetch: recording }),
    admin: createBridgeClient({ baseUrl: target.url, token: target.adminToken, retries: 0, fetch: recording }),
    state: storeRecords(createBridgeClient({ baseUrl: target.url, token: target.bridgeToken, retries: 0, fetch: recording }), 'connector'),
    waitMs: 200,
    log: createLogger('error', sink),
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  let client: Client | undefined;
  try {
    client = await mcpClient('boundary-pass', b);
    const tools = mcpTools().filter((t) => options.only?.(`tool ${t.name}`) ?? true);
    log(`boundary pass: ${tools.length} MCP tools`);
    for (const tool of tools) {
      const began = Date.now();
      const tally = (report.by[`tool ${tool.name}`] ??= { requests: 0, ms: 0, byClass: { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, timeout: 0, error: 0 } });
      const replayKey = tool.replay !== undefined && 'key' in tool.replay ? tool.replay.key : undefined;
      const start = startingArgs(tool.inputSchema, replayKey);
      const cases: [Field | undefined, Boundary | undefined][] = [[undefined, undefined]];
      for (const field of bodyFields(tool.inputSchema, start)) for (const bd of boundaries(field.schema, field.sample)) if (options.short !== true || SHORT.test(bd.label)) cases.push([field, bd]);
      for (const [field, bd] of cases) {
        const name = field === undefined ? '(the starting call)' : fieldLabel(field.place);
        const violate = (kind: BoundaryKind, detail: string): void => {
          report.violations.push({ kind, where: `tool ${tool.name}`, field: name, label: bd?.label ?? '', detail });
          log(`  ✗ ${kind} tool ${tool.name} ${name} = ${bd?.label ?? ''}: ${detail.slice(0, 300)}`);
        };
        const value = bd === undefined ? undefined : 'json' in bd.value ? bd.value.json : Number(bd.value.literal);
        const base = field?.base !== undefined ? (field.base as Record<string, unknown>) : start;
        const args = freshKey(field === undefined ? start : (withAt(base, field.place, value) as Record<string, unknown>), replayKey, tool.inputSchema, field);
        const watch = await observe(life(), { category: 'tool', server: 'herald', method: 'TOOL', path: '/mcp/tool', auth: 'bridge', headers: {} }).catch(() => undefined);
        answers = [];
        errors = [];
        const limit = field !== undefined && /timeout/i.test(fieldName(field.place)) && typeof value === 'number' && value > 0 ? timeoutMs + Math.min(value, 120) * 1000 : timeoutMs;
        let timer: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          callTool(client, tool.name, args),
          new Promise<Error>((resolve) => (timer = setTimeout(() => resolve(new Error(`no answer in ${limit} ms`)), limit))),
        ]).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
        clearTimeout(timer);
        tally.requests += 1;
        const fivexx = answers.filter((x) => x.status >= 500);
        tally.byClass[result instanceof Error ? (/no answer/.test(result.message) ? 'timeout' : 'error') : fivexx.length > 0 || result.text.startsWith(FAILED) ? '5xx' : result.isError ? '4xx' : '2xx'] += 1;
        if (await exitedWithin(life().target, 0)) {
          violate('crash', `herald exited; its last output:\n${life().target.proc.output().trim().split('\n').slice(-8).join('\n')}`);
          return;
        }
        if (result instanceof Error) {
          violate(/no answer/.test(result.message) ? 'timeout' : 'connection', result.message);
          continue;
        }
        for (const x of fivexx) violate('5xx', `the bridge answered ${x.status} to ${x.route}: ${result.text.slice(0, 200)}`);
        if (result.text.startsWith(FAILED)) violate('5xx', `the tool failed: ${errors.join(' | ').slice(0, 300)}`);
        for (const e of errors) if (e.includes('does not match its output schema')) violate('contract', e);
        // Refused: by the MCP server's own gate (the bridge never asked) or by the bridge (no answer of it a 2xx).
        const refused = result.isError && !answers.some((x) => x.status < 300);
        if (refused && watch !== undefined) for (const problem of await watch.changes()) violate('write-on-refusal', problem);
        if (field === undefined || bd === undefined) continue;
        const valid = unstorableField({}, args) === undefined && validBy(tool.inputSchema, { json: args });
        if (valid) continue;
        if (!result.isError) violate('validity', `arguments the input schema refuses were answered without an error: ${result.text.slice(0, 200)}`);
        else if (!result.text.startsWith('Invalid arguments')) violate('validity', `arguments the input schema refuses reached the tool: ${result.text.slice(0, 200)}`);
        else if (!result.text.includes(String(field.place[0]))) violate('unnamed', `the error does not name ${String(field.place[0])}: ${result.text.slice(0, 200)}`);
        if (answers.length > 0) violate('validity', `arguments the input schema refuses were sent to the bridge: ${answers.map((x) => x.route).join(', ')}`);
      }
      tally.ms += Date.now() - began;
    }
  } finally {
    await client?.close();
    await server.close();
    await rm(stateDir, { recursive: true, force: true });
  }
}

export interface BoundaryOptions {
  databaseUrl?: string | undefined;
  /** The smoke test's short form (SHORT's boundaries only). */
  short?: boolean;
  only?: (name: string) => boolean;
  timeoutMs?: number;
  log?: (line: string) => void;
}

/** Both passes on one Herald (a fresh one after a crash). */
export async function runBoundary(options: BoundaryOptions = {}): Promise<BoundaryReport> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  const report: BoundaryReport = { by: {}, skipped: [], violations: [], durationMs: 0 };
  let life = await begin(options.databaseUrl, log);
  let restarts = 0;
  const restart = async (): Promise<boolean> => {
    await end(life);
    if (++restarts > 10) return false;
    life = await begin(options.databaseUrl, log);
    return true;
  };
  const passOptions = { log, ...(options.short !== undefined ? { short: options.short } : {}), ...(options.only !== undefined ? { only: options.only } : {}), ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) };
  try {
    await httpBoundaryPass(() => life, restart, report, passOptions);
    if (!life.target.alive() && !(await restart())) return report;
    await mcpBoundaryPass(() => life, report, passOptions);
  } finally {
    await end(life);
    report.durationMs = Date.now() - started;
  }
  return report;
}

/** The summary: requests per operation and tool, then the violations, one line each (at most 40). */
export function formatBoundary(report: BoundaryReport): string {
  const rows = Object.entries(report.by);
  const ops = rows.filter(([k]) => !k.startsWith('tool '));
  const tools = rows.filter(([k]) => k.startsWith('tool '));
  const total = (list: typeof rows): number => list.reduce((n, [, t]) => n + t.requests, 0);
  const fivexx = rows.reduce((n, [, t]) => n + t.byClass['5xx'], 0);
  const out = [
    `boundary pass: ${ops.length} operations (${total(ops)} requests), ${tools.length} MCP tools (${total(tools)} calls) in ${(report.durationMs / 1000).toFixed(1)} s; ${fivexx} 5xx`,
    `  per operation/tool (requests): ${rows.map(([k, t]) => `${k} ${t.requests}`).join(', ')}`,
    `  slowest: ${[...rows].sort(([, a], [, b]) => b.ms - a.ms).slice(0, 5).map(([k, t]) => `${k} ${(t.ms / 1000).toFixed(1)} s`).join(', ')}`,
  ];
  if (report.skipped.length > 0) out.push(`  not walked: ${report.skipped.join(', ')}`);
  out.push(`violations: ${report.violations.length}`);
  for (const v of report.violations.slice(0, 40)) out.push(`  ${v.kind} ${v.where} ${v.field} = ${v.label}: ${v.detail.split('\n')[0]?.slice(0, 200) ?? ''}`);
  if (report.violations.length > 40) out.push(`  … and ${report.violations.length - 40} more`);
  return out.join('\n');
}
