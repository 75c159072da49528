import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/infra/db/group-commit.js';

class Unavailable extends Error {}

/** Let the event loop turn until `cond` holds (the first statement has started). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

/** A commit function that records its statements and can be held open. */
function recorder(fail: (item: number) => Error | undefined = () => undefined) {
  const statements: number[][] = [];
  let release: () => void = () => undefined;
  let gate: Promise<void> | undefined;
  return {
    statements,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    open() {
      gate = undefined;
      release();
    },
    async commit(items: readonly number[]): Promise<string[]> {
      statements.push([...items]);
      if (gate !== undefined) await gate;
      for (const i of items) {
        const err = fail(i);
        if (err !== undefined) throw err;
      }
      return items.map((i) => `row ${i}`);
    },
  };
}

describe('GroupCommit', () => {
  it('commits a lone item at once, alone: no wait when idle', async () => {
    const r = recorder();
    const g = new GroupCommit<number, string>({ commit: (i) => r.commit(i), maxInFlight: 1, maxBatch: 10, isFatal: () => false });
    await expect(g.submit(1)).resolves.toBe('row 1');
    await expect(g.submit(2)).resolves.toBe('row 2');
    expect(r.statements).toEqual([[1], [2]]);
  });

  it('gathers what arrives during a commit into the next statement, each submitter getting its own result', async () => {
    const r = recorder();
    const g = new GroupCommit<number, string>({ commit: (i) => r.commit(i), maxInFlight: 1, maxBatch: 3, isFatal: () => false });
    r.hold();
    const first = g.submit(0);
    await until(() => r.statements.length === 1);
    const rest = [1, 2, 3, 4, 5].map((i) => g.submit(i));
    r.open();
    await expect(Promise.all([first, ...rest])).resolves.toEqual([0, 1, 2, 3, 4, 5].map((i) => `row ${i}`));
    // One statement in flight at a time, at most three items each.
    expect(r.statements).toEqual([[0], [1, 2, 3], [4, 5]]);
  });

  it('retries a failed batch item by item, so one bad item fails alone', async () => {
    const r = recorder((i) => (i === 2 ? new Error('bad row') : undefined));
    const g = new GroupCommit<number, string>({ commit: (i) => r.commit(i), maxInFlight: 1, maxBatch: 10, isFatal: () => false });
    r.hold();
    const first = g.submit(0);
    await until(() => r.statements.length === 1);
    const rest = [1, 2, 3].map((i) => g.submit(i).catch((e: Error) => e.message));
    r.open();
    await expect(Promise.all([first, ...rest])).resolves.toEqual(['row 0', 'row 1', 'bad row', 'row 3']);
  });

  it('fails the whole batch at once when the store is unavailable', async () => {
    const r = recorder(() => new Unavailable('store unavailable'));
    const g = new GroupCommit<number, string>({ commit: (i) => r.commit(i), maxInFlight: 1, maxBatch: 10, isFatal: (e) => e instanceof Unavailable });
    const results = await Promise.all([1, 2, 3].map((i) => g.submit(i).catch((e: unknown) => e)));
    expect(results.every((e) => e instanceof Unavailable)).toBe(true);
    // One statement for the three: no item-by-item retry against a store that is down.
    expect(r.statements).toEqual([[1, 2, 3]]);
  });
});
