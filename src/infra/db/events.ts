import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Store } from './database.js';
import { coalesced } from './doorbell.js';

/** The one NOTIFY channel every topic shares (one LISTEN session per process, whatever it follows). */
export const EVENTS_CHANNEL = 'herald_events';
/** More ids than this in one burst are announced as "anything may have changed" (a NOTIFY payload is small). */
const MAX_IDS = 50;
/** A LISTEN that could not be set up is tried again after this, doubling up to the ceiling. */
const LISTEN_RETRY_BASE_MS = 200;
const LISTEN_RETRY_MAX_MS = 30_000;

/**
 * Told that something of a topic changed: `ids` say what (ids only, never content: re-read it from
 * the database), or are undefined when anything may have changed (a LISTEN session that healed,
 * a burst too large to list).
 */
export type EventListener = (ids: readonly string[] | undefined) => void;

/** What one NOTIFY carries: its sender (which skips its own), the topic, and the changed ids. */
interface Payload {
  o: string;
  t: string;
  i?: string[];
}

/**
 * Cross-process events: `publish` after the commit that made a change; every `subscribe`r of the
 * topic, in this process and (on PostgreSQL) in every other one on the database, hears of it.
 * Like the doorbell, a burst is coalesced: this process's listeners are told on the next turn of
 * the event loop, the others through one NOTIFY per topic per `coalesceMs`. A lost NOTIFY only
 * delays what the listener's own polling would find; after the LISTEN session heals, every
 * listener is told "anything may have changed".
 */
export class Events {
  /** This process, so that it skips its own NOTIFYs (its listeners were told directly). */
  private readonly origin = randomBytes(6).toString('hex');
  private readonly listeners = new Map<string, Set<EventListener>>();
  /** Per topic, what changed since the last announcement here, and since the last NOTIFY (undefined: anything). */
  private readonly topics = new Map<string, { local: Changes; remote: Changes; tellLocal(): void; tellRemote(): void }>();
  /** The LISTEN session once set up (undefined while setting it up failed and a retry waits). */
  private session: Promise<(() => Promise<void>) | undefined> | undefined;
  private listenFailures = 0;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly store: Pick<Store, 'kind' | 'db' | 'listen'>,
    private readonly coalesceMs = 5,
  ) {}

  /** Something of `topic` changed (`id`, when one thing did). Call after the change's commit. */
  publish(topic: string, id?: string): void {
    const t = this.topic(topic);
    t.local.add(id);
    t.tellLocal();
    if (this.store.kind !== 'postgres') return; // one process: there is nobody else to tell
    t.remote.add(id);
    t.tellRemote();
  }

  /** Hear of `topic`'s changes; returns the unsubscribe. The first subscription LISTENs. */
  async subscribe(topic: string, listener: EventListener): Promise<() => void> {
    let set = this.listeners.get(topic);
    if (set === undefined) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    if (this.store.kind === 'postgres') this.listen();
    await this.session;
    return () => void set.delete(listener);
  }

  /** Stop listening (the wiring does, as the process stops). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const session = this.session;
    this.session = undefined;
    const stop = await session;
    await stop?.();
  }

  /**
   * Set up the LISTEN session once. When that fails, try again with backoff until it holds: the
   * subscribers' own polling covers meanwhile, and once it holds they are told "anything may
   * have changed".
   */
  private listen(): void {
    if (this.closed || this.session !== undefined || this.retry !== undefined) return;
    this.session = this.store.listen(EVENTS_CHANNEL, (payload) => this.heard(payload)).then(
      async (stop) => {
        if (this.closed) {
          await stop();
          return undefined;
        }
        if (this.listenFailures > 0) this.heard(undefined);
        this.listenFailures = 0;
        return stop;
      },
      () => {
        this.session = undefined;
        if (this.closed) return undefined;
        const ceiling = Math.min(LISTEN_RETRY_MAX_MS, LISTEN_RETRY_BASE_MS * 2 ** this.listenFailures);
        this.listenFailures++;
        this.retry = setTimeout(() => {
          this.retry = undefined;
          this.listen();
        }, Math.round(ceiling / 2 + Math.random() * (ceiling / 2)));
        this.retry.unref();
        return undefined;
      },
    );
  }

  private topic(topic: string) {
    let t = this.topics.get(topic);
    if (t === undefined) {
      const local = new Changes();
      const remote = new Changes();
      t = {
        local,
        remote,
        tellLocal: coalesced(() => this.tell(topic, local.take()), 0),
        tellRemote: coalesced(() => this.notify(topic, remote.take()), this.coalesceMs),
      };
      this.topics.set(topic, t);
    }
    return t;
  }

  private tell(topic: string, ids: readonly string[] | undefined): void {
    for (const listener of this.listeners.get(topic) ?? []) {
      try {
        listener(ids);
      } catch {
        // A listener's failure is its own; the others are still told.
      }
    }
  }

  private notify(topic: string, ids: readonly string[] | undefined): void {
    const payload: Payload = { o: this.origin, t: topic, ...(ids !== undefined ? { i: [...ids] } : {}) };
    sql`select pg_notify(${EVENTS_CHANNEL}, ${JSON.stringify(payload)})`.execute(this.store.db).catch(() => undefined);
  }

  private heard(payload: string | undefined): void {
    if (payload === undefined || payload === '') {
      // The session healed: whatever was sent meanwhile is lost, so every topic may have changed.
      for (const topic of this.listeners.keys()) this.tell(topic, undefined);
      return;
    }
    let p: Payload;
    try {
      p = JSON.parse(payload) as Payload;
    } catch {
      return;
    }
    if (p.o === this.origin || typeof p.t !== 'string') return;
    this.tell(p.t, Array.isArray(p.i) ? p.i.map(String) : undefined);
  }
}

/** The ids changed since the last `take`; undefined once any change named none, or too many. */
class Changes {
  private ids: Set<string> | undefined = new Set();

  add(id: string | undefined): void {
    if (this.ids === undefined) return;
    if (id === undefined || this.ids.size >= MAX_IDS) this.ids = undefined;
    else this.ids.add(id);
  }

  take(): readonly string[] | undefined {
    const ids = this.ids;
    this.ids = new Set();
    return ids === undefined ? undefined : [...ids];
  }
}
