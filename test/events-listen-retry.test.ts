import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { Events } from '../src/infra/db/events.js';
import { waitFor } from './support/wait.js';

/**
 * A first LISTEN that fails (the database briefly unreachable at start-up) is tried again with
 * backoff until it holds; meanwhile a subscription still stands (its own polling covers), and once
 * LISTEN holds the subscribers are told that anything may have changed.
 */
describe('events: a failed first LISTEN', () => {
  it('is retried until it holds; subscribing does not fail meanwhile', async () => {
    let tries = 0;
    let notify: ((payload?: string) => void) | undefined;
    let stopped = 0;
    const store = {
      kind: 'postgres' as const,
      db: {} as Kysely<unknown>,
      listen: async (_channel: string, onNotify: (payload?: string) => void) => {
        tries += 1;
        if (tries <= 2) throw new Error('connection refused');
        notify = onNotify;
        return async () => void (stopped += 1);
      },
    };
    const events = new Events(store);
    const heard: (readonly string[] | undefined)[] = [];
    try {
      // Before: the rejected LISTEN was kept, so this (and every later subscribe) threw, and it was never tried again.
      await events.subscribe('t', (ids) => heard.push(ids));
      await waitFor(() => notify !== undefined, 'LISTEN to hold after the retries', 10_000);
      expect(tries).toBe(3);
      // Once it holds: whatever was notified meanwhile was missed, so anything may have changed.
      await waitFor(() => heard.length > 0, 'the subscribers to be told');
      expect(heard).toEqual([undefined]);
      notify?.(JSON.stringify({ o: 'another process', t: 't', i: ['a'] }));
      expect(heard).toEqual([undefined, ['a']]);
    } finally {
      await events.close();
    }
    expect(stopped).toBe(1);
  });
});
