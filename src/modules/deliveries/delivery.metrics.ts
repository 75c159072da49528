import { Counter, Histogram, type Registry } from 'prom-client';
import { addStatusPanels, LATENCY_BUCKETS } from '../../infra/metrics.js';
import type { StoredKind as DeliveryKind, FailureCode } from './delivery.js';

/** How reconciliation of an in-doubt delivery came out. */
export type ReconcileVerdict = 'found' | 'absent' | 'wait' | 'undecided';

/**
 * The deliveries module's metrics. Labels are the protocol's fixed words (kind, outcome, failure
 * code, verdict) and the operator's identity names: never a request_id, a destination name
 * (callers choose those) or content.
 */
export class DeliveryMetrics {
  private readonly accepted: Counter<'kind'>;
  private readonly finished: Counter<'kind' | 'outcome' | 'code' | 'identity'>;
  private readonly retries: Counter<'kind'>;
  private readonly redrives: Counter<'kind'>;
  private readonly leaseExpiries: Counter<'kind'>;
  private readonly leasesLost: Counter<'kind'>;
  private readonly reconciliations: Counter<'kind' | 'verdict'>;
  private readonly unmapped: Counter;
  private readonly acceptToSend: Histogram<'kind'>;
  private readonly claimToSend: Histogram<'kind'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.accepted = new Counter({ name: 'herald_deliveries_accepted_total', help: 'New deliveries accepted (202, not a replay), by kind', labelNames: ['kind'], registers });
    this.finished = new Counter({
      name: 'herald_deliveries_finished_total',
      help: 'Deliveries that reached delivered, failed or unknown, by kind, outcome, failure code (none when delivered) and the identity sent as',
      labelNames: ['kind', 'outcome', 'code', 'identity'],
      registers,
    });
    this.retries = new Counter({ name: 'herald_delivery_retries_total', help: 'Attempts that failed transiently and will be retried, by kind', labelNames: ['kind'], registers });
    this.redrives = new Counter({
      name: 'herald_delivery_redrives_total',
      help: 'Failed, unknown or abandoned deliveries made due again by a re-POST of the same request, by kind',
      labelNames: ['kind'],
      registers,
    });
    this.leaseExpiries = new Counter({
      name: 'herald_delivery_lease_expiries_total',
      help: 'Deliveries claimed again after the lease of the dispatcher attempting them expired (it died or hung), by kind',
      labelNames: ['kind'],
      registers,
    });
    this.leasesLost = new Counter({
      name: 'herald_delivery_leases_lost_total',
      help: 'Attempts that could not record their outcome because their lease had expired (another dispatcher re-drives them), by kind',
      labelNames: ['kind'],
      registers,
    });
    this.reconciliations = new Counter({
      name: 'herald_delivery_reconciliations_total',
      help: 'In-doubt deliveries checked against channel history, by kind and verdict (found, absent, wait, undecided)',
      labelNames: ['kind', 'verdict'],
      registers,
    });
    this.unmapped = new Counter({ name: 'herald_post_unmapped_total', help: 'Posts failed because their (guild, destination) has no channel mapped', registers });
    this.acceptToSend = new Histogram({
      name: 'herald_delivery_accept_to_send_seconds',
      help: 'From accepting a delivery to the platform confirming it (retries included), by kind',
      labelNames: ['kind'],
      buckets: [...LATENCY_BUCKETS],
      registers,
    });
    this.claimToSend = new Histogram({
      name: 'herald_delivery_claim_to_send_seconds',
      help: 'From a dispatcher claiming a delivery to the platform confirming it (the successful attempt), by kind',
      labelNames: ['kind'],
      buckets: [...LATENCY_BUCKETS],
      registers,
    });
    addStatusPanels(
      registry,
      { section: 'deliveries', title: 'Delivered per minute', metric: 'herald_deliveries_finished_total', show: 'perMinute', where: (l) => l['outcome'] === 'delivered', unit: '/min' },
      { section: 'deliveries', title: 'Failed or unknown per minute', metric: 'herald_deliveries_finished_total', show: 'perMinute', where: (l) => l['outcome'] !== 'delivered', unit: '/min' },
      { section: 'deliveries', title: 'Accept → send p95 (upper bucket bound)', metric: 'herald_delivery_accept_to_send_seconds', show: 'p95', unit: ' s' },
    );
  }

  accept(kind: DeliveryKind): void {
    this.accepted.inc({ kind });
  }

  finish(kind: DeliveryKind, outcome: 'delivered' | 'failed' | 'unknown' | 'unconfirmed', code: FailureCode | null | undefined, identity: string): void {
    this.finished.inc({ kind, outcome, code: code ?? 'none', identity });
  }

  /** The status page's figures for each identity besides the default (where Herald is several bots). */
  showIdentities(registry: Registry, names: readonly string[]): void {
    for (const name of names) {
      addStatusPanels(
        registry,
        { section: 'deliveries', title: `As ${name}: delivered per minute`, metric: 'herald_deliveries_finished_total', show: 'perMinute', where: (l) => l['identity'] === name && l['outcome'] === 'delivered', unit: '/min' },
        { section: 'deliveries', title: `As ${name}: failed or unknown per minute`, metric: 'herald_deliveries_finished_total', show: 'perMinute', where: (l) => l['identity'] === name && l['outcome'] !== 'delivered', unit: '/min' },
      );
    }
  }

  /** A delivery confirmed by the platform: accepted at `createdAt`, claimed at `claimedAt`. */
  sent(kind: DeliveryKind, createdAt: Date, claimedAt: Date, now: Date): void {
    this.acceptToSend.observe({ kind }, Math.max(0, (now.getTime() - createdAt.getTime()) / 1000));
    this.claimToSend.observe({ kind }, Math.max(0, (now.getTime() - claimedAt.getTime()) / 1000));
  }

  retry(kind: DeliveryKind): void {
    this.retries.inc({ kind });
  }

  redrive(kind: DeliveryKind): void {
    this.redrives.inc({ kind });
  }

  leaseExpired(kind: DeliveryKind): void {
    this.leaseExpiries.inc({ kind });
  }

  leaseLost(kind: DeliveryKind): void {
    this.leasesLost.inc({ kind });
  }

  reconciled(kind: DeliveryKind, verdict: ReconcileVerdict): void {
    this.reconciliations.inc({ kind, verdict });
  }

  postUnmapped(): void {
    this.unmapped.inc();
  }
}
