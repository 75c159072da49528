import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newToken } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('the sandbox banner of `herald serve`', () => {
  let db: TestDatabase;
  let proc: HeraldProcess;
  const supplied = newToken();
  /** The banner: what `herald serve` printed before its start-up log line. */
  let banner: string;
  beforeAll(async () => {
    db = await testDatabase();
    proc = await startHeraldProcess(
      ['serve'],
      {
        PORT: '0',
        HERALD_SANDBOX_PORT: '0',
        HERALD_DATA_DIR: db.dataDir,
        MCP_BRIDGE_TOKEN: supplied,
        // A newcomer's typo: warned about at start-up, and otherwise ignored.
        HERALD_COMAND_EXECUTION_ENABLED: 'true',
        ...(db.databaseUrl !== undefined ? { DATABASE_URL: db.databaseUrl } : {}),
      },
      180_000,
      { built: true },
    );
    const out = proc.output();
    const start = out.indexOf('\nHerald is running');
    banner = out.slice(start + 1, out.indexOf('\n\n{', start) + 1);
  }, 200_000);
  afterAll(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.kill('SIGTERM');
      await proc.exited;
    }
    await db?.drop();
  });

  it('prints only the tokens Herald generated, never one from the environment', async () => {
    const generated = (JSON.parse(await readFile(path.join(db.dataDir, 'sandbox-tokens.json'), 'utf8')) as { admin: string }).admin;
    expect(proc.output()).not.toContain(supplied);
    expect(banner).toContain('  MCP_BRIDGE_TOKEN: (from your environment)');
    expect(banner).toContain(`  export HERALD_ADMIN_TOKEN=${generated}`);
  });

  it('lists every place an operator opens, and each one answers', async () => {
    const places = Object.fromEntries([...banner.matchAll(/^ {2}([A-Z][A-Za-z ]+): +(http:\/\/\S+)/gm)].map((m) => [m[1], m[2]]));
    expect(Object.keys(places)).toEqual(['API', 'API docs', 'Archive UI', 'Status page', 'Metrics', 'Discord sandbox', 'Slack sandbox']);
    const api = new URL(proc.url ?? '').origin;
    expect(places).toMatchObject({ 'API docs': `${api}/docs`, 'Archive UI': `${api}/ui/archive` });
    expect(places['Metrics']).toBe(`${places['Status page']}metrics`);
    for (const label of ['API docs', 'Archive UI', 'Status page', 'Metrics', 'Discord sandbox', 'Slack sandbox']) {
      const res = await fetch(places[label] ?? '');
      expect({ label, status: res.status }).toEqual({ label, status: 200 });
      if (label === 'Metrics') expect(await res.text()).toContain('herald_');
    }
  });

  it('is the banner the README shows (ports, folder, store and tokens aside)', async () => {
    const origin = (label: string): string => new URL(/^ {2}[A-Za-z ]+: +(http:\/\/\S+)/m.exec(banner.slice(banner.indexOf(`  ${label}:`)))?.[1] ?? '').origin;
    const normalized = banner
      .replaceAll(origin('API'), 'http://127.0.0.1:8787')
      .replaceAll(origin('Discord sandbox'), 'http://127.0.0.1:8788')
      .replaceAll(origin('Status page'), 'http://127.0.0.1:8789')
      .replaceAll(origin('Slack sandbox'), 'http://127.0.0.1:8791')
      .replaceAll(db.dataDir, '/path/to/herald/data')
      // On PostgreSQL (TEST_DATABASE_URL) the first line names it; the README shows a new user's PGlite.
      .replace('Herald is running (PostgreSQL).', 'Herald is running (embedded PGlite in /path/to/herald/data).')
      .replace(/(export [A-Z_]+=)\S+/g, '$1…')
      .replace('  MCP_BRIDGE_TOKEN: (from your environment)', '  export MCP_BRIDGE_TOKEN=…');
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const shown = /`npm start` prints where everything is:\n\n```\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(normalized).toBe(shown);
  });

  it('warns about a variable Herald does not know, naming the one meant', () => {
    expect(proc.output()).toContain('herald: warning: HERALD_COMAND_EXECUTION_ENABLED is not a Herald variable and is ignored: did you mean HERALD_COMMAND_EXECUTION_ENABLED?\n');
  });

  it('shares no request_id with another example a newcomer meets (README, Swagger) unless the body is the same', async () => {
    const api = new URL(proc.url ?? '').origin;
    const tryIt = banner.slice(banner.indexOf('Try it:')).replaceAll(api, 'http://127.0.0.1:8787');
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const readmeShell = [...readme.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```/gm)].map((m) => m[1]).join('\n');
    const examples = [
      ...(await curlRequests(tryIt)).map((r) => ({ ...r, source: 'banner' })),
      ...(await curlRequests(readmeShell)).map((r) => ({ ...r, source: 'README' })),
      ...(await contractExamples()).map((r) => ({ ...r, source: 'contract' })),
    ];
    // One namespace per creating endpoint of one Herald (the README's helper bot is another Herald).
    const byKey = new Map<string, { source: string; body: string }[]>();
    for (const e of examples) {
      const body = e.body as Record<string, unknown> | undefined;
      const key = body?.['request_id'] ?? body?.['idempotencyKey'];
      if (typeof key !== 'string') continue;
      const id = `${e.method} ${e.url} ${key}`;
      byKey.set(id, [...(byKey.get(id) ?? []), { source: e.source, body: canonical(body) }]);
    }
    const deliveries = [...byKey].filter(([id]) => id.startsWith('POST http://127.0.0.1:8787/mcp/deliveries ')).flatMap(([, uses]) => uses.map((u) => u.source));
    // The check has something to check: each source posts deliveries.
    expect(new Set(deliveries)).toEqual(new Set(['banner', 'README', 'contract']));
    const collisions = [...byKey].filter(([, uses]) => new Set(uses.map((u) => u.body)).size > 1).map(([id, uses]) => `${id}: ${uses.map((u) => `${u.source} ${u.body}`).join(' | ')}`);
    expect(collisions).toEqual([]);
  });
});

interface ExampleRequest {
  method: string;
  url: string;
  body: unknown;
}

/**
 * The requests the curl commands in `script` make, read by bash itself (so quoting and
 * `$(printf 'a%.0s' {1..64})` expand as a newcomer's shell expands them) but run nothing: a
 * restricted bash (no redirections, no `/` in commands) with no PATH, where `curl` is a function
 * that prints its arguments. Every other command is not found. A curl inside `$(…)` goes unseen.
 */
async function curlRequests(script: string): Promise<ExampleRequest[]> {
  const prelude = `curl() { printf '%s\\0' "$@"; printf '\\1'; }\nkill() { :; }\n`;
  const out = await new Promise<string>((resolve, reject) => {
    const bash = spawn('/bin/bash', ['--noprofile', '--norc', '-r', '-c', prelude + script], { env: { PATH: '/nonexistent' }, stdio: ['ignore', 'pipe', 'ignore'] });
    let text = '';
    bash.stdout.on('data', (d: Buffer) => (text += d.toString()));
    bash.once('error', reject);
    bash.once('close', () => resolve(text));
  });
  return out
    .split('\x01')
    .map((record) => record.split('\0').filter((arg) => arg !== ''))
    .filter((args) => args.length > 0)
    .map((args) => {
      const after = (flags: string[]): string | undefined => {
        const i = args.findIndex((a) => flags.includes(a));
        return i >= 0 ? args[i + 1] : undefined;
      };
      const data = after(['-d', '--data', '--data-raw']);
      let body: unknown;
      try {
        body = data === undefined ? undefined : JSON.parse(data);
      } catch {
        body = data;
      }
      const url = new URL(args.find((a) => /^https?:\/\//.test(a)) ?? 'http://invalid/');
      return { method: after(['-X', '--request']) ?? (data !== undefined ? 'POST' : 'GET'), url: `${url.origin}${url.pathname}`, body };
    });
}

/** The request bodies the contract offers as examples (Swagger UI's "Try it out"), against the default Herald. */
async function contractExamples(): Promise<ExampleRequest[]> {
  const spec = JSON.parse(await readFile(path.join(ROOT, 'generated/openapi.json'), 'utf8')) as {
    paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { example?: unknown; examples?: Record<string, { value?: unknown }> }> } }>>;
  };
  const found: ExampleRequest[] = [];
  for (const [route, operations] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const media = operation.requestBody?.content?.['application/json'];
      if (media === undefined) continue;
      const bodies = [...(media.example !== undefined ? [media.example] : []), ...Object.values(media.examples ?? {}).map((e) => e.value)];
      for (const body of bodies) found.push({ method: method.toUpperCase(), url: `http://127.0.0.1:8787${route}`, body });
    }
  }
  return found;
}

/** JSON with its keys sorted, so two spellings of one body compare equal. */
function canonical(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sort) : typeof v === 'object' && v !== null ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sort(x)])) : v;
  return JSON.stringify(sort(value));
}
