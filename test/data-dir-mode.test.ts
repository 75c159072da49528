import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../src/infra/db/database.js';

/**
 * The embedded database holds message text (DMs, the inbox): its folder is this user's alone
 * (0700), as the uploads and tokens beside it are, whatever the umask; PGlite writes its files 0644.
 */
describe('the embedded store folder', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('is readable by its owner only, new or opened again after someone widened it', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-data-mode-'));
    dirs.push(dataDir);
    const old = process.umask(0o022);
    try {
      const store = await openStore({ dataDir, databaseUrl: undefined });
      await store.close();
      expect((await stat(path.join(dataDir, 'pglite'))).mode & 0o777).toBe(0o700);
      await chmod(path.join(dataDir, 'pglite'), 0o755);
      const again = await openStore({ dataDir, databaseUrl: undefined });
      await again.close();
      expect((await stat(path.join(dataDir, 'pglite'))).mode & 0o777).toBe(0o700);
    } finally {
      process.umask(old);
    }
    // Two new embedded stores (initdb, then opening it again): tens of seconds on a busy machine.
  }, 90_000);
});
