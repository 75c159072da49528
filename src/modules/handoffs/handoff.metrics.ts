import { Counter, type Registry } from 'prom-client';
import { REJECT_REASONS, type RejectReason } from './envelope.js';

/** The handoffs module's metrics: received handoffs by outcome (accepted, or why refused), sends accepted. */
export class HandoffMetrics {
  private readonly received: Counter<'outcome'>;
  private readonly sent: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.received = new Counter({
      name: 'herald_handoffs_received_total',
      help: 'Handoff candidates received, by outcome: accepted, or the first check they failed',
      labelNames: ['outcome'],
      registers,
    });
    this.sent = new Counter({ name: 'herald_handoffs_sent_total', help: 'New handoffs accepted for sending (not a repeat of a request_id)', registers });
    // Every outcome shows from the start, at zero.
    for (const outcome of ['accepted', ...REJECT_REASONS]) this.received.inc({ outcome }, 0);
  }

  receipt(outcome: 'accepted' | RejectReason): void {
    this.received.inc({ outcome });
  }

  accepted(): void {
    this.sent.inc();
  }
}
