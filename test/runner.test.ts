import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defineModule, type ModuleServices } from '../src/modules/contract.js';
import { PRUNE_EVERY_MS, schedulePrune, startModules } from '../src/modules/runner.js';

const log = pino({ level: 'silent' });
const clock = { now: () => new Date() };

describe('the module runner', () => {
  afterEach(() => vi.useRealTimers());

  it('runs every module\'s upkeep each hour until stopped, and a failing task does not stop the others: it is counted by name (an alert), not a silent log line', async () => {
    vi.useFakeTimers();
    const runs: string[] = [];
    const registry = new Registry();
    const stop = schedulePrune(
      [
        { what: 'a', run: async () => void runs.push('a') },
        { what: 'broken', run: async () => Promise.reject(new Error('down')) },
        { what: 'b', run: async () => void runs.push('b') },
      ],
      clock,
      log,
      registry,
    );
    expect(runs).toEqual([]);
    const failures = async () => (await registry.getSingleMetricAsString('herald_periodic_work_failures_total')).split('\n').filter((l) => !l.startsWith('#')).sort();
    // Every task's series exists before it fails.
    expect(await failures()).toEqual(['herald_periodic_work_failures_total{what="a"} 0', 'herald_periodic_work_failures_total{what="b"} 0', 'herald_periodic_work_failures_total{what="broken"} 0']);
    await vi.advanceTimersByTimeAsync(PRUNE_EVERY_MS);
    expect(runs).toEqual(['a', 'b']);
    expect(await failures()).toContain('herald_periodic_work_failures_total{what="broken"} 1');
    stop();
    await vi.advanceTimersByTimeAsync(PRUNE_EVERY_MS);
    expect(runs).toEqual(['a', 'b']);
  });

  it('gives a module what the modules above it give, refuses one below it, and closes them last first', async () => {
    const closed: string[] = [];
    const first = defineModule<{ n: number }>({ name: 'first', start: async () => ({ gives: { n: 1 }, close: async () => void closed.push('first') }) });
    const second = defineModule<{ n: number }>({
      name: 'second',
      start: async ({ use }) => ({ gives: { n: use(first).n + 1 }, close: async () => void closed.push('second') }),
    });
    const started = await startModules([first, second], [], {} as Omit<ModuleServices, 'use' | 'commands'>);
    expect(started.use(second).n).toBe(2);
    await started.close();
    expect(closed).toEqual(['second', 'first']);
    const early = defineModule<undefined>({ name: 'early', start: async ({ use }) => ({ gives: void use(first) }) });
    await expect(startModules([early, first], [], { log } as Omit<ModuleServices, 'use' | 'commands'>)).rejects.toThrow(/module first is used before it started/);
  });
});
