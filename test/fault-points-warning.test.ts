import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { startHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { resetFaultPoints } from '../src/infra/faults/fault-points.js';
import { createLogger } from '../src/infra/log.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { testDatabase } from './support/db.js';
import { heraldEnv, newToken } from './support/herald.js';

/** Start Herald with HERALD_FAULT_POINTS as given (in this process's environment, where it is read), and return what it logged. */
async function startupLog(faultPoints: string | undefined): Promise<Record<string, unknown>[]> {
  const before = process.env['HERALD_FAULT_POINTS'];
  if (faultPoints === undefined) delete process.env['HERALD_FAULT_POINTS'];
  else process.env['HERALD_FAULT_POINTS'] = faultPoints;
  resetFaultPoints();
  const sandbox = await new DiscordSandbox().start();
  const db = await testDatabase();
  const lines: Record<string, unknown>[] = [];
  const out = new PassThrough();
  out.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  try {
    const config = loadConfig(heraldEnv({ sandbox, db, bridgeToken: newToken(), adminToken: newToken() }, { HOST: '127.0.0.1', LOG_LEVEL: 'info' }));
    const herald = await startHerald({ config, log: createLogger(config.logLevel, out) });
    await herald.close();
    return lines;
  } finally {
    await sandbox.close();
    await db.drop();
    if (before === undefined) delete process.env['HERALD_FAULT_POINTS'];
    else process.env['HERALD_FAULT_POINTS'] = before;
    resetFaultPoints();
  }
}

describe('HERALD_FAULT_POINTS outside the chaos campaign', () => {
  afterEach(() => resetFaultPoints());

  it('is announced at start-up with the points it arms: a process that stops itself must not do so silently', async () => {
    // Probability 0: armed, never taken (this test's process must not stop itself).
    const lines = await startupLog('before-send=0, after-answer=0');
    const warned = lines.filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).includes('HERALD_FAULT_POINTS'));
    expect(warned).toHaveLength(1);
    expect(warned[0]?.['level']).toBe(40);
    expect(warned[0]?.['fault_points']).toEqual(['before-send=0', 'after-answer=0']);
  }, 60_000);

  it('says nothing when it is not set', async () => {
    const lines = await startupLog(undefined);
    expect(lines.some((l) => typeof l['msg'] === 'string' && (l['msg'] as string).includes('HERALD_FAULT_POINTS'))).toBe(false);
    expect(lines.length).toBeGreaterThan(0);
  }, 60_000);
});
