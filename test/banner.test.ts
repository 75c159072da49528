import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORMS } from '../src/platforms/platforms.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newToken } from './support/herald.js';
import { waitFor } from './support/wait.js';
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
    // The banner is printed last; its block ends with the "Try it" lines.
    await waitFor(() => /Try it:\n(?: {2}curl .*\n){3}\n/.test(proc.output()), 'the banner', 30_000);
    const out = proc.output();
    const start = out.indexOf('\nHerald is running');
    banner = out.slice(start + 1, out.indexOf('\n\n', out.indexOf('Try it:', start)) + 1);
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
      .replace(/(export [A-Z_]*TOKEN=)\S+/g, '$1…')
      .replace('  MCP_BRIDGE_TOKEN: (from your environment)', '  export MCP_BRIDGE_TOKEN=…');
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const shown = /`npm start` prints where everything is:\n\n```\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(normalized).toBe(shown);
  });

  it('says what is on and what is off, each with the variable that turns it on', () => {
    const block = banner.slice(banner.indexOf('What is on'));
    const rows = Object.fromEntries([...block.matchAll(/^ {2}(on|off) +(.+?) {2,}(.+)$/gm)].map((m) => [m[2]?.trim(), { state: m[1], how: m[3] }]));
    expect(Object.keys(rows)).toEqual(['command execution', 'trusted bots (handoffs)', 'IRC', 'Slack', 'inbox webhook']);
    // The newcomer's typo above did not turn command execution on.
    expect(rows['command execution']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_COMMAND_EXECUTION_ENABLED=true') });
    expect(rows['trusted bots (handoffs)']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_TRUSTED_BOT_IDS') });
    expect(rows['IRC']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_IRC_URL') });
    expect(rows['Slack']).toEqual({ state: 'on', how: expect.stringContaining('Slack sandbox') });
    expect(rows['inbox webhook']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_INBOX_WEBHOOK_URL') });
  });

  it('comes after the start-up log lines, none inside it, and checks no token of its own sandboxes', () => {
    const out = proc.output();
    const at = out.indexOf('\nHerald is running');
    expect(banner).not.toContain('{"level"');
    // Start-up is logged above it: the gateway connected, the store, "herald started".
    const above = out.slice(0, at);
    for (const msg of ['store ready', 'gateway connected; slash commands registered', 'herald started']) expect(above, msg).toContain(`"msg":"${msg}"`);
    // A token Herald made up for its own sandbox is not the operator's to hear about.
    expect(out).not.toContain('SLACK_BOT_TOKEN"');
    expect(out).not.toMatch(/accepted SLACK_BOT_TOKEN|check DISCORD_TOKEN/);
  });

  it('warns about a variable Herald does not know, naming the one meant', () => {
    expect(proc.output()).toContain('herald: warning: HERALD_COMAND_EXECUTION_ENABLED is not a Herald variable and is ignored: did you mean HERALD_COMMAND_EXECUTION_ENABLED?\n');
  });

  it('runs the README\'s first delivery as written, in a shell holding the banner\'s export lines', async () => {
    // The lines a newcomer pastes; the bridge token came from this test's environment, as the banner says.
    const exported = Object.fromEntries([...banner.matchAll(/^ {2}export ([A-Z_]+)=(\S+)$/gm)].map((m) => [m[1], m[2]]));
    expect(Object.keys(exported)).toEqual(['HERALD_URL', 'SANDBOX_URL', 'SLACK_SANDBOX_URL', 'METRICS_URL', 'HERALD_ADMIN_TOKEN']);
    expect(exported['HERALD_URL']).toBe(new URL(proc.url ?? '').origin);
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const tryIt = shellBlocks(readme.slice(readme.indexOf('## Try it (sandbox mode)')))[0] ?? '';
    const env = { ...exported, MCP_BRIDGE_TOKEN: supplied, PATH: process.env['PATH'] ?? '' };
    const run = await runShell(tryIt, env);
    expect(run.code).toBe(0);
    // The post went out once, and its state says so.
    const state = async (): Promise<{ state?: string; url?: string }> =>
      (await (await fetch(`${exported['HERALD_URL']}/mcp/deliveries/${'a'.repeat(64)}`, { headers: { authorization: `Bearer ${supplied}` } })).json()) as { state?: string };
    await waitFor(async () => (await state()).state === 'delivered', 'the README\'s post to be delivered');
    expect(run.stdout).toContain('"existing":false');
  });

  it('shares no request_id with another example a newcomer meets (README, the guides, Swagger) unless the body is the same', async () => {
    const api = new URL(proc.url ?? '').origin;
    const tryIt = banner.slice(banner.indexOf('Try it:')).replaceAll(api, 'http://127.0.0.1:8787');
    const examples = [
      ...(await curlRequests(tryIt, DEFAULT_PLACES)).map((r) => ({ ...r, source: 'banner' })),
      ...(await Promise.all((await guides()).map(async (g) => (await curlRequests(shellBlocks(g.text).join('\n'), DEFAULT_PLACES)).map((r) => ({ ...r, source: g.file === 'README.md' ? 'README' : 'guides' }))))).flat(),
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
    expect(new Set(deliveries)).toEqual(new Set(['banner', 'README', 'guides', 'contract']));
    const collisions = [...byKey].filter(([, uses]) => new Set(uses.map((u) => u.body)).size > 1).map(([id, uses]) => `${id}: ${uses.map((u) => `${u.source} ${u.body}`).join(' | ')}`);
    expect(collisions).toEqual([]);
  });
});

describe('every guide\'s commands (README.md and docs/**/*.md)', () => {
  /** Where the guides' variables point here: hosts no literal in a guide can name by chance. */
  const PLACES = { HERALD_URL: 'http://herald.test', SANDBOX_URL: 'http://sandbox.test', SLACK_SANDBOX_URL: 'http://slack-sandbox.test', METRICS_URL: 'http://metrics.test', HERALD_MCP_URL: 'http://mcp.test/mcp' };
  // The MCP server (`herald mcp --http`, HERALD_MCP_URL) speaks MCP, not the contract's routes.
  const OTHERS = new Set(['sandbox.test', 'slack-sandbox.test', 'metrics.test', 'mcp.test']);

  it('name places only through the banner\'s variables: no default port written out in a shell block, nothing written outside the folder it runs in', async () => {
    const found: string[] = [];
    for (const g of await guides()) {
      for (const block of shellBlocks(g.text)) {
        for (const m of block.matchAll(/(?:127\.0\.0\.1|localhost):(?:878[7-9]|879[01])\b/g)) found.push(`${g.file}: ${m[0]}`);
        for (const m of block.matchAll(/(?:^|[\s;|&])\d*>>?\s*\/(?!dev\/null)\S*/gm)) found.push(`${g.file}: writes ${m[0].trim()}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('link only to files that exist (other guides, the screenshots of `npm run screenshots`)', async () => {
    const broken: string[] = [];
    for (const g of await guides()) {
      for (const m of g.text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = (m[1] ?? '').split('#')[0] ?? '';
        if (target === '' || /^[a-z]+:/.test(target)) continue;
        try {
          await readFile(path.resolve(ROOT, path.dirname(g.file), target));
        } catch {
          broken.push(`${g.file}: ${m[1]}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('call only routes the contract has, with its method, on a URL built from the variables', async () => {
    const spec = JSON.parse(await readFile(path.join(ROOT, 'generated/openapi.json'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
    const routes = [
      ...Object.entries(spec.paths).flatMap(([route, ops]) =>
        // A parameter may be empty here: the dry run gives what a command prints (`ID=$(curl …)`) as nothing.
        Object.keys(ops).map((method) => ({ method: method.toUpperCase(), route, pattern: new RegExp(`^${route.replace(/\{[^}]+\}/g, '[^/]*')}$`) })),
      ),
      // The pages a platform declares it serves outside the contract (its folder's index.ts).
      ...PLATFORMS.flatMap((p) => p.pages ?? []).map((page) => ({ method: page.method, route: page.path, pattern: new RegExp(`^${page.path}$`) })),
    ];
    const problems: string[] = [];
    let checked = 0;
    for (const g of await guides()) {
      for (const r of await curlRequests(shellBlocks(g.text).join('\n'), PLACES)) {
        const url = new URL(r.url);
        if (r.url === 'http://invalid/' || r.url.includes('$')) {
          problems.push(`${g.file}: a curl with no URL its shell could expand (${r.method} ${r.url})`);
          continue;
        }
        // The sandboxes and the metrics port are not the contract's; every other URL is a Herald's
        // (this one, or another the guide starts on a port of its own).
        if (OTHERS.has(url.host)) continue;
        checked++;
        if (!routes.some((route) => route.method === r.method && route.pattern.test(url.pathname))) problems.push(`${g.file}: ${r.method} ${url.pathname} is not in the contract`);
      }
    }
    expect(problems).toEqual([]);
    // The walk has something to walk: every guide's calls together.
    expect(checked).toBeGreaterThan(60);
  });
});

/** README.md and every Markdown file under docs/ (a new guide is walked without naming it here). */
async function guides(): Promise<{ file: string; text: string }[]> {
  const docs = (await readdir(path.join(ROOT, 'docs'), { recursive: true })).filter((f) => f.endsWith('.md')).sort().map((f) => path.join('docs', f));
  return Promise.all(['README.md', ...docs].map(async (file) => ({ file, text: await readFile(path.join(ROOT, file), 'utf8') })));
}

/** The fenced shell blocks (```sh, ```bash) of a Markdown text, in order. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```/gm)].map((m) => m[1] ?? '');
}

/** The banner's default places, for comparing its requests with the README's, the guides' and the contract's. */
const DEFAULT_PLACES = { HERALD_URL: 'http://127.0.0.1:8787', SANDBOX_URL: 'http://127.0.0.1:8788', SLACK_SANDBOX_URL: 'http://127.0.0.1:8791', METRICS_URL: 'http://127.0.0.1:8789' };

/** Run `script` in bash (no profile) in a folder of its own, with exactly `env`; its exit code and what it printed. */
async function runShell(script: string, env: Record<string, string>, extraFd?: (fd3: Readable) => void): Promise<{ code: number | null; stdout: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'guide-'));
  try {
    return await new Promise((resolve, reject) => {
      const bash = spawn('/bin/bash', ['--noprofile', '--norc', '-c', script], { cwd: dir, env: { HOME: dir, TMPDIR: dir, ...env }, stdio: ['ignore', 'pipe', 'ignore', 'pipe'] });
      let stdout = '';
      bash.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      if (extraFd !== undefined) extraFd(bash.stdio[3] as Readable);
      const timer = setTimeout(() => bash.kill('SIGKILL'), 60_000);
      bash.once('error', reject);
      bash.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout });
      });
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface ExampleRequest {
  method: string;
  url: string;
  body: unknown;
}

/**
 * The requests the curl commands in `script` make, read by bash itself (so quoting, variables and
 * `$(printf 'a%.0s' {1..64})` expand as a newcomer's shell expands them) but run nothing: no PATH,
 * a folder of its own, and `curl` a function that writes its arguments to a descriptor of their own
 * (so a curl inside `$(…)` is seen too). Every other command is not found.
 */
async function curlRequests(script: string, places: Record<string, string>): Promise<ExampleRequest[]> {
  const prelude = `curl() { printf '%s\\0' "$@" >&3; printf '\\1' >&3; }\nkill() { :; }\n`;
  let text = '';
  const tokens = { MCP_BRIDGE_TOKEN: 'bridge-token', HERALD_ADMIN_TOKEN: 'admin-token' };
  await runShell(prelude + script, { PATH: '/nonexistent', ...tokens, ...places }, (fd3) => fd3.on('data', (d: Buffer) => (text += d.toString())));
  return text
    .split('\x01')
    .map((record) => record.split('\0').filter((arg) => arg !== ''))
    .filter((args) => args.length > 0)
    .map((args) => {
      const after = (flags: string[]): string | undefined => {
        const i = args.findIndex((a) => flags.includes(a));
        return i >= 0 ? args[i + 1] : undefined;
      };
      const data = after(['-d', '--data', '--data-raw', '--data-binary', '-F', '--form']);
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
