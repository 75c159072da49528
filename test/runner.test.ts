import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defineModule, type ModuleServices } from '../src/modules/contract.js';
import { PRUNE_EVERY_MS, schedulePrune, startModules } from '../src/modules/runner.js';

const log = pino({ level: 'silent' });
const clock = { now: () => new Date() };

describe('the module runner', () => {
  afterEach(() => vi.useRealTimers());

  it('runs every module\'s upkeep each hour until stopped, and a failing task does not stop the others', async () => {
    vi.useFakeTimers();
    const runs: string[] = [];
    const stop = schedulePrune(
      [
        { what: 'a', run: async () => void runs.push('a') },
        { what: 'broken', run: async () => Promise.reject(new Error('down')) },
        { what: 'b', run: async () => void runs.push('b') },
      ],
      clock,
      log,
    );
    expect(runs).toEqual([]);
    await vi.advanceTimersByTimeAsync(PRUNE_EVERY_MS);
    expect(runs).toEqual(['a', 'b']);
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
