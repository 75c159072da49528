import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type Herald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { MEMORY_IDS } from '../src/platforms/memory/index.js';
import { PLATFORMS } from '../src/platforms/platforms.js';
import { client, type Client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newRequestId, newToken } from './support/herald.js';
import { waitForDelivery } from './support/wait.js';
import { consolePlatform } from './fixtures/console-platform/index.js';
import type { ConsoleLine, ConsolePlatform } from './fixtures/console-platform/console-facets.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIXTURE = 'test/fixtures/console-platform';

/**
 * A platform is one folder: the console platform (test/fixtures/console-platform/) is written
 * against the platform contract alone and listed only here, beside the registry's, and Herald
 * runs it end to end: a destination maps to it, a post goes out once, its proof finds it again.
 */
describe('a platform from one folder: the console fixture', () => {
  let db: TestDatabase;
  let herald: Herald;
  let admin: Client;
  let bridge: Client;
  let file: string;
  beforeAll(async () => {
    db = await testDatabase();
    file = path.join(db.dataDir, 'console.jsonl');
    const platforms = [...PLATFORMS, consolePlatform({ file })];
    const env = {
      HERALD_TRANSPORT: 'memory',
      PORT: '0',
      HOST: '127.0.0.1',
      HERALD_METRICS_PORT: 'off',
      HERALD_DATA_DIR: db.dataDir,
      MCP_BRIDGE_TOKEN: newToken(),
      HERALD_ADMIN_TOKEN: newToken(),
      HERALD_POLL_MS: '100',
      LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
      ...(db.databaseUrl !== undefined ? { DATABASE_URL: db.databaseUrl } : {}),
    };
    const config = loadConfig(env, undefined, platforms);
    herald = await startHerald({ config, log: createLogger(config.logLevel), platforms });
    admin = client(herald.url ?? '', env.HERALD_ADMIN_TOKEN);
    bridge = client(herald.url ?? '', env.MCP_BRIDGE_TOKEN);
  }, 120_000);
  afterAll(async () => {
    await herald?.close();
    await db?.drop();
  });

  const lines = async (): Promise<ConsoleLine[]> => (herald.transports.get('console') as ConsolePlatform).lines();

  it('maps a destination to it, posts exactly once (a repeat is existing), and answers the delivered state with its url', async () => {
    const mapped = await admin.put(`/admin/destinations/${MEMORY_IDS.guild}/alerts`, { transport: 'console', channel: 'alerts' });
    expect([mapped.status, mapped.json]).toEqual([200, { guild_id: MEMORY_IDS.guild, destination: 'alerts', transport: 'console', channel: 'alerts' }]);
    const bad = await admin.put(`/admin/destinations/${MEMORY_IDS.guild}/ops`, { transport: 'console', channel: 'Not A Channel' });
    expect([bad.status, bad.json]).toEqual([400, { error: 'channel must be a console channel name such as alerts' }]);

    const requestId = newRequestId();
    const post = { request_id: requestId, kind: 'post', target: { guild_id: MEMORY_IDS.guild, destination: 'alerts' }, body: { content: 'hello console' } };
    const first = await bridge.post('/mcp/deliveries', post);
    expect([first.status, (first.json as { existing?: boolean }).existing]).toEqual([202, false]);
    const delivered = await waitForDelivery(bridge, requestId, 'delivered', 'the post to reach the console', 20_000);
    const again = await bridge.post('/mcp/deliveries', post);
    expect([again.status, (again.json as { existing?: boolean }).existing]).toEqual([202, true]);
    // The repeat stores no second send: one line, the first send's.
    const written = await lines();
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({ channel: 'alerts', content: 'hello console' });
    expect(delivered).toMatchObject({ state: 'delivered', kind: 'post', message_ref: requestId, url: `console://localhost/alerts/${written[0]?.id}` });
    // The admin view says which platform it went to; the console's url is no link a person opens elsewhere.
    const detail = (await admin.get(`/admin/deliveries/${requestId}`)).json as Record<string, unknown>;
    expect(detail).toMatchObject({ state: 'delivered', transport: 'console', channel_id: 'alerts' });
    expect(detail['link']).toBeUndefined();
  });

  it('proves a send by its key: the line the key wrote is found, a key that wrote nothing is absent', async () => {
    const [line] = await lines();
    if (line === undefined) throw new Error('the first test wrote no line');
    const keyed = herald.transports.get('console')?.keyed;
    const span = [new Date(Date.parse(line.at) - 60_000), new Date(Date.parse(line.at) + 60_000)] as const;
    const signal = AbortSignal.timeout(5_000);
    expect(await keyed?.findByKey('alerts', line.key, ...span, signal)).toEqual({ found: { channelId: 'alerts', messageId: line.id } });
    expect(await keyed?.findByKey('alerts', 'no-such-key', ...span, signal)).toEqual({ absent: true });
    expect(await keyed?.findByKey('ops', line.key, ...span, signal)).toEqual({ absent: true });
  });

  it('touches nothing outside its folder: nothing in Herald names it, and it imports only the platform contract', async () => {
    // (a) Herald's own code, contract, migrations and docs never name the fixture.
    const named: string[] = [];
    for (const top of ['src', 'openapi', 'generated', 'migrations', 'docs', 'README.md']) {
      const entries = top.includes('.') ? [''] : ((await readdir(path.join(ROOT, top), { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.relative(path.join(ROOT, top), path.join(e.parentPath, e.name))));
      for (const entry of entries) {
        const where = path.join(top, entry);
        const text = await readFile(path.join(ROOT, where), 'utf8');
        if (/console-platform|consolePlatform|ConsolePlatform|['"`]console['"`]/.test(text)) named.push(where);
      }
    }
    expect(named).toEqual([]);
    // (b) Each of its imports stays in its folder or points at the platform contract (and the infrastructure under it).
    const contract = ['src/platforms/plugin.ts', 'src/platforms/platform.ts', 'src/platforms/messages.ts', 'src/platforms/commands.ts'];
    const outside: string[] = [];
    const files = (await readdir(path.join(ROOT, FIXTURE), { recursive: true })).filter((f) => f.endsWith('.ts'));
    expect(files.sort()).toEqual(['console-facets.ts', 'index.ts', 'settings.ts']);
    for (const f of files) {
      const text = await readFile(path.join(ROOT, FIXTURE, f), 'utf8');
      for (const [, spec] of text.matchAll(/(?:from\s+|import\()\s*'([^']+)'/g)) {
        if (spec === undefined || !spec.startsWith('.')) continue;
        const target = path.posix.normalize(path.posix.join(FIXTURE, path.posix.dirname(f), spec)).replace(/\.js$/, '.ts');
        if (!target.startsWith(`${FIXTURE}/`) && !contract.includes(target) && !target.startsWith('src/infra/')) outside.push(`${f} → ${target}`);
      }
    }
    expect(outside).toEqual([]);
  });
});
