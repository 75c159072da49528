import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newToken } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';

describe('the sandbox banner of `herald serve`', () => {
  let db: TestDatabase;
  let proc: HeraldProcess | undefined;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.kill('SIGTERM');
      await proc.exited;
    }
    await db.drop();
  });

  it('prints only the tokens Herald generated, never one from the environment', async () => {
    const supplied = newToken();
    proc = await startHeraldProcess(['serve'], {
      PORT: '0',
      HERALD_SANDBOX_PORT: '0',
      HERALD_DATA_DIR: db.dataDir,
      MCP_BRIDGE_TOKEN: supplied,
      ...(db.databaseUrl !== undefined ? { DATABASE_URL: db.databaseUrl } : {}),
    });
    // The banner is printed before the start-up log line startHeraldProcess waits for.
    const output = proc.output();
    const generated = (JSON.parse(await readFile(path.join(db.dataDir, 'sandbox-tokens.json'), 'utf8')) as { admin: string }).admin;
    expect(output).not.toContain(supplied);
    expect(output).toContain('  MCP_BRIDGE_TOKEN: (from your environment)');
    expect(output).toContain(`  export HERALD_ADMIN_TOKEN=${generated}`);
    proc.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);
    expect(proc.output()).not.toContain(supplied);
  });
});
