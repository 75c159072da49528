import { Counter, type Registry } from 'prom-client';

/** The identity module's metrics: failed pairing-code redeems (guessing shows up here). */
export class IdentityMetrics {
  private readonly redeemFailures: Counter<'reason'>;

  constructor(registry: Registry) {
    this.redeemFailures = new Counter({
      name: 'herald_pairing_redeem_failures_total',
      help: 'Pairing-code redeems refused, by reason: invalid (unknown, used or expired code) or throttled (too many failures from one address)',
      labelNames: ['reason'],
      registers: [registry],
    });
  }

  redeemFailed(throttled: boolean): void {
    this.redeemFailures.inc({ reason: throttled ? 'throttled' : 'invalid' });
  }
}
