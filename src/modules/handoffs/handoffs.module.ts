import { capabilitiesOf } from '../../platforms/platform.js';
import type { ModuleParts, ModuleServices } from '../contract.js';
import type { HandoffLimits } from './settings.js';
import { deliveriesModule } from '../deliveries/index.js';
import { destinationsModule } from '../destinations/index.js';
import { handoffOperations } from './handoff.http.js';
import { handoffSendKind } from './handoff.kind.js';
import { HandoffMetrics } from './handoff.metrics.js';
import { HandoffCatchUp } from './handoff.catchup.js';
import { pruneCatchupCursors, pruneInbox } from './handoff.repository.js';
import { HandoffService } from './handoff.service.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { HandoffsDb } from './handoff.table.js';

/** The event announcing that a handoff arrived in the inbox. */
const ARRIVED = 'handoffs.arrived';

/** Acknowledged handoffs are kept this long, then pruned. */
const INBOX_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** Start the handoffs module (its declaration is index.ts). */
export async function startHandoffs({ config, settings, db: tables, clock, log, registry, transports, events, use }: ModuleServices<HandoffLimits>): Promise<ModuleParts<{ handoffs: HandoffService }>> {
  const db = tablesOf<HandoffsDb>(tables);
  const home = transports.home;
  const can = capabilitiesOf(home);
  const { deliveries, declare } = use(deliveriesModule);
  const { destinations } = use(destinationsModule);
  // A handoff goes only to a mapped destination's channel, or a thread under one (handoff.place.ts).
  const places = { transport: home.name, mapped: (transport: string, channelId: string) => destinations.mapped(transport, channelId), channels: home.channels };
  declare(handoffSendKind(places));
  const handoffs = new HandoffService(db, deliveries, clock, {
    places,
    limits: settings,
    selfId: () => (home.history !== undefined ? home.history.selfId() : Promise.reject(new Error(`the ${home.name} transport does not say who the bot is`))),
    canSend: can.send && can.channels,
    log,
    metrics: new HandoffMetrics(registry),
    publish: () => events.publish(ARRIVED),
    // The fallback, should news of an arrival on another replica be lost: a quarter of the dispatchers' poll (250 ms by default).
    waitPollMs: Math.max(25, Math.round(config.pollMs / 4)),
  });
  // A wait on this replica ends as soon as a handoff is taken in on any replica.
  const unsubscribe = await events.subscribe(ARRIVED, () => handoffs.arrived());
  // Messages others write are listened to only while some bot is trusted.
  const unlisten = handoffs.enabled ? home.inbound?.onMessage((m) => handoffs.take(m)) : undefined;
  // What the live stream missed (not held at the time, its holder killed mid-receipt) is read back
  // from the channels' history by the process holding it, where the platform can (Discord).
  const recent = home.inbound?.recent;
  const maxExpirySeconds = settings.maxExpirySeconds;
  const catchUp =
    handoffs.enabled && recent !== undefined
      ? new HandoffCatchUp({ db, recent, admit: (m, path) => handoffs.admit(m, path), clock, log, maxExpirySeconds })
      : undefined;
  catchUp?.start();
  return {
    gives: { handoffs },
    operations: [handoffOperations(handoffs)],
    prune: [
      { what: 'the handoff inbox', run: (now) => pruneInbox(db, new Date(now.getTime() - INBOX_RETENTION_MS)) },
      { what: 'handoff catch-up progress', run: (now) => pruneCatchupCursors(db, new Date(now.getTime() - maxExpirySeconds * 1000)) },
    ],
    close: async () => {
      unsubscribe();
      unlisten?.();
      await catchUp?.close();
      handoffs.close();
    },
  };
}
