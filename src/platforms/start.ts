import type { Kysely } from 'kysely';
import type { Store } from '../infra/db/database.js';
import { processHolderId } from '../infra/db/singleton.js';
import { LinkMetrics } from './links.js';
import type { RunningPlatform, PlatformPlugin, PlatformServices } from './plugin.js';
import { PLATFORMS } from './platforms.js';
import { Singletons } from './singletons.js';
import { storableRunning } from './storable-inbound.js';

/**
 * The platforms these settings configure, home first: people's identities live there, and DMs go
 * there. `platforms`: every platform Herald can speak (the registry; a test may add its own).
 */
export function configuredPlatforms(settings: Readonly<Record<string, unknown>>, home: string, platforms: readonly PlatformPlugin[] = PLATFORMS): PlatformPlugin[] {
  return platforms.filter((t) => settings[t.name] !== undefined).sort((a, b) => Number(b.name === home) - Number(a.name === home));
}

/** What every platform of this process shares. */
export interface PlatformsShared extends Pick<PlatformServices, 'clock' | 'log' | 'registry' | 'serving' | 'dispatching' | 'ownMessage' | 'ledger' | 'adminGate'> {
  readonly store: Store;
  /** HERALD_SINGLETON_TTL_MS: how long a held connection's lease lasts unrenewed. */
  readonly singletonTtlMs: number;
  /** HERALD_SINGLETON_DOWN_MS: a holder whose connection stays down this long lets another replica have it. */
  readonly singletonDownMs: number;
}

/**
 * Start each platform in order with what it is given: the store, its links (metrics, status page)
 * and the leases of connections one process holds at a time. Each is closed through `cleanups`.
 */
export async function startPlatforms(
  platforms: readonly PlatformPlugin[],
  settings: Readonly<Record<string, unknown>>,
  shared: PlatformsShared,
  cleanups: (() => Promise<void>)[],
): Promise<{ running: RunningPlatform[]; singletons: Singletons }> {
  const { store, singletonTtlMs, singletonDownMs, ...services } = shared;
  const db = store.db as Kysely<unknown>;
  const links = new LinkMetrics(shared.registry);
  const singletons = new Singletons({ kind: store.kind, db }, processHolderId(), singletonTtlMs, shared.registry, singletonDownMs);
  cleanups.push(() => singletons.close());
  const running: RunningPlatform[] = [];
  for (const p of platforms) {
    const link = (name: string, up: () => boolean): void => links.track(p.name, name, up);
    const started = await p.start(settings[p.name], { ...services, store, db, link, singleton: (name, request) => singletons.hold(name, request) });
    cleanups.push(() => started.close());
    // Every platform's inbound events and command invocations are made storable as they enter (src/platforms/storable-inbound.ts).
    running.push(storableRunning(started));
  }
  return { running, singletons };
}
