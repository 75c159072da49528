import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald } from '../src/app.js';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { loadConfig } from '../src/config.js';
import { readContract } from '../src/infra/contract/spec.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { contractOutput } from '../src/infra/mcp/tool.js';
import { defineModule } from '../src/modules/contract.js';
import { destinationsModule } from '../src/modules/destinations/index.js';
import { MODULES } from '../src/modules/modules.js';
import { PINS_CONTRACT, pinsModule } from './fixtures/pins-capability/index.js';
import type { PinsDb } from './fixtures/pins-capability/migration.js';
import { pinsTools } from './fixtures/pins-capability/pins.tool.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';

// A capability written as one folder (test/fixtures/pins-capability/): its own contract file, its
// migration, its settings, its MCP tool. Registered here only, as one more module of the list.

const ROOT = path.resolve(import.meta.dirname, '..');
const FOLDER = path.join(ROOT, 'test/fixtures/pins-capability');
const CHANNEL = IDS.channels.alerts;
const MESSAGE = '456789012345678901';

// A client whose rules leave only get_capabilities on: pin_message is off for it.
const POLICY = `
clients:
  no-pins:
    tools: [get_capabilities]
`;

describe('a capability in one folder (pins, registered by its test alone)', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  const post = (body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${h.url}/mcp/pins`, { method: 'POST', headers: { authorization: `Bearer ${h.bridgeToken}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-pins-'));
    await writeFile(path.join(dir, 'policy.yaml'), POLICY);
    h = await startTestHerald({ modules: [...MODULES, pinsModule], env: { HERALD_GATEWAY: 'off', HERALD_POLICY: path.join(dir, 'policy.yaml'), FIXTURE_PINS_MAX: '3' } });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves its operation, validated by the merged contract, and writes its table through its migration', async () => {
    const ok = await post({ channel_id: CHANNEL, message_id: MESSAGE, note: 'read this' });
    expect(ok.status).toBe(201);
    const pin = (await ok.json()) as { id: number; channel_id: string };
    expect(pin).toMatchObject({ channel_id: CHANNEL, message_id: MESSAGE, note: 'read this' });
    const rows = await tablesOf<PinsDb>(h.herald.store.db).selectFrom('fixture_pins').selectAll().execute();
    expect(rows.map((r) => [r.id, r.message_id])).toEqual([[pin.id, MESSAGE]]);
    // A bad body is refused by the contract, the reason naming the field.
    const bad = await post({ channel_id: 'general', message_id: MESSAGE });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'channel_id must be a channel id (17 to 20 digits)' });
    const missing = await post({ channel_id: CHANNEL });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toMatch(/message_id/);
    // The served contract has its path; the bundle's operations are still there.
    const yaml = await (await fetch(`${h.url}/openapi.yaml`)).text();
    expect(yaml).toContain('/mcp/pins:');
    expect(yaml).toContain('operationId: createDelivery');
  });

  it('reads its own settings (FIXTURE_PINS_MAX), and is given them when it starts', async () => {
    expect(loadConfig({ FIXTURE_PINS_MAX: '3' }, [...MODULES, pinsModule]).modules['pins']).toEqual({ max: 3 });
    expect(() => loadConfig({ FIXTURE_PINS_MAX: '0' }, [pinsModule])).toThrow(/FIXTURE_PINS_MAX must be an integer from 1 to 10000/);
    // 3 pins at most here: one is stored above; the fourth is refused.
    await post({ channel_id: CHANNEL, message_id: MESSAGE });
    await post({ channel_id: CHANNEL, message_id: MESSAGE });
    const over = await post({ channel_id: CHANNEL, message_id: MESSAGE });
    expect(over.status).toBe(400);
    expect(await over.json()).toEqual({ error: 'at most 3 pins are kept (FIXTURE_PINS_MAX)' });
    expect(await h.herald.use(pinsModule).count()).toBe(3);
    await tablesOf<PinsDb>(h.herald.store.db).deleteFrom('fixture_pins').execute();
  });

  it('its MCP tool calls its operation by id through the bridge client, and answers what its output schema says', async () => {
    const contract = readContract(PINS_CONTRACT);
    const bridge = createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, contracts: [contract] });
    const [tool] = pinsTools(contract);
    expect(tool?.name).toBe('pin_message');
    expect(tool?.operations).toEqual(['createPin']);
    const r = await tool?.handler({ channel_id: CHANNEL, message_id: MESSAGE, note: 'from the tool' }, { bridge });
    expect(r?.isError).toBeUndefined();
    const valid = new Ajv({ strict: false }).compile(contractOutput('createPin', contract));
    expect(valid(r?.structuredContent), JSON.stringify(valid.errors)).toBe(true);
    expect(r?.structuredContent).toMatchObject({ message_id: MESSAGE, note: 'from the tool' });
    // Its declaration lists it (what `herald mcp` would serve, were it in src/modules/modules.ts).
    expect(pinsModule.tools?.().map((t) => t.name)).toEqual(['pin_message']);
  });

  it("is held by the operator's policy: a client whose rules leave pin_message off is refused the direct HTTP call too", async () => {
    const refused = await post({ channel_id: CHANNEL, message_id: MESSAGE }, { 'x-herald-policy-client': 'no-pins' });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({ error: 'refused by policy: tools' });
    const count = await tablesOf<PinsDb>(h.herald.store.db).selectFrom('fixture_pins').select((e) => e.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(1);
  });
});

describe('what a module list declares is checked before anything starts', () => {
  const env = { PORT: '0', HERALD_METRICS_PORT: 'off', MCP_BRIDGE_TOKEN: newToken(), HERALD_TRANSPORT: 'memory', HERALD_DATA_DIR: path.join(tmpdir(), 'herald-never-opened') };

  it('a module list missing a needed module stops start-up, naming the module and what it needs', async () => {
    const modules = MODULES.filter((m) => m !== destinationsModule);
    await expect(startHerald({ config: loadConfig(env, modules), modules })).rejects.toThrow(
      'module deliveries needs a module answering resolveDestination, and none in the module list does; module handoffs needs module destinations, which is not in the module list; ' +
        'module files needs module destinations, which is not in the module list; module inbox needs module destinations, which is not in the module list',
    );
  });

  it('a contract declaring a path, operationId or component Herald has stops start-up, naming both', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-clash-'));
    try {
      const file = path.join(dir, 'clash.json');
      await writeFile(file, JSON.stringify({ openapi: '3.1.0', info: { title: 'clash', version: '1' }, paths: { '/mcp/files': { get: { operationId: 'clash', responses: { '200': { description: 'ok' } } } } } }));
      const clash = defineModule<undefined>({ name: 'clash', contract: file, start: async () => ({ gives: undefined }) });
      await expect(startHerald({ config: loadConfig(env), modules: [...MODULES, clash] })).rejects.toThrow(
        "module clash's contract declares the path /mcp/files, which the bundled contract (openapi/) declares too: rename it in its contract file",
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the fixture touches nothing outside its folder', () => {
  const NAMES = /\/mcp\/pins|pinsModule|pin_message|createPin|fixture_pins|pins-capability|PinRequest|FIXTURE_PINS/;

  it('nothing under src/, openapi/, generated/, migrations/, docs/ or the README names it', async () => {
    const named: string[] = [];
    for (const where of ['src', 'openapi', 'generated', 'migrations', 'docs']) {
      for (const file of await readdir(path.join(ROOT, where), { recursive: true, withFileTypes: true })) {
        if (!file.isFile()) continue;
        const full = path.join(file.parentPath, file.name);
        if (NAMES.test(await readFile(full, 'utf8'))) named.push(path.relative(ROOT, full));
      }
    }
    if (NAMES.test(await readFile(path.join(ROOT, 'README.md'), 'utf8'))) named.push('README.md');
    expect(named).toEqual([]);
  });

  it('its imports stay in its folder, or reach only the module contract, the infrastructure and the bridge client', async () => {
    const allowed = (target: string): boolean =>
      target.startsWith(FOLDER + path.sep) || target === path.join(ROOT, 'src/modules/contract.ts') || target.startsWith(path.join(ROOT, 'src/infra') + path.sep) || target === path.join(ROOT, 'src/client/bridge-client.ts');
    const outside: string[] = [];
    const files = (await readdir(FOLDER)).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) {
      for (const m of (await readFile(path.join(FOLDER, f), 'utf8')).matchAll(/(?:from|import\()\s*'([^']+)'/g)) {
        const spec = m[1] ?? '';
        if (!spec.startsWith('.')) continue; // a package (kysely)
        const target = path.resolve(FOLDER, spec).replace(/\.js$/, '.ts');
        if (!allowed(target)) outside.push(`${f}: ${spec}`);
      }
    }
    expect(outside).toEqual([]);
  });
});
