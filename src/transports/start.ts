import type { Kysely } from 'kysely';
import type { Store } from '../platform/db/database.js';
import { processHolderId } from '../platform/db/singleton.js';
import { LinkMetrics } from './links.js';
import type { RunningTransport, TransportPlugin, TransportServices } from './plugin.js';
import { TRANSPORTS } from './registry.js';
import { Singletons } from './singletons.js';
import { storableRunning } from './storable-inbound.js';

/** The platforms these settings configure, home first: people's identities live there, and DMs go there. */
export function configuredPlatforms(settings: Readonly<Record<string, unknown>>, home: string): TransportPlugin[] {
  return TRANSPORTS.filter((t) => settings[t.name] !== undefined).sort((a, b) => Number(b.name === home) - Number(a.name === home));
}

/** What every platform of this process shares. */
export interface PlatformsShared extends Pick<TransportServices, 'clock' | 'log' | 'registry' | 'serving' | 'dispatching' | 'ownMessage' | 'ledger'> {
  readonly store: Store;
  /** HERALD_SINGLETON_TTL_MS: how long a held connection's lease lasts unrenewed. */
  readonly singletonTtlMs: number;
}

/**
 * Start each platform in order with what it is given: the store, its links (metrics, status page)
 * and the leases of connections one process holds at a time. Each is closed through `cleanups`.
 */
export async function startPlatforms(
  platforms: readonly TransportPlugin[],
  settings: Readonly<Record<string, unknown>>,
  shared: PlatformsShared,
  cleanups: (() => Promise<void>)[],
): Promise<{ running: RunningTransport[]; singletons: Singletons }> {
  const { store, singletonTtlMs, ...services } = shared;
  const db = store.db as Kysely<unknown>;
  const links = new LinkMetrics(shared.registry);
  const singletons = new Singletons({ kind: store.kind, db }, processHolderId(), singletonTtlMs, shared.registry);
  cleanups.push(() => singletons.close());
  const running: RunningTransport[] = [];
  for (const p of platforms) {
    const link = (name: string, up: () => boolean): void => links.track(p.name, name, up);
    const started = await p.start(settings[p.name], { ...services, store, db, link, singleton: (name, request) => singletons.hold(name, request) });
    cleanups.push(() => started.close());
    // Every platform's inbound events and command invocations are made storable as they enter (src/transports/storable-inbound.ts).
    running.push(storableRunning(started));
  }
  return { running, singletons };
}
