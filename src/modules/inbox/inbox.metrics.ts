import { Counter, type Registry } from 'prom-client';

const KINDS = ['mention', 'dm', 'reply', 'message', 'reaction', 'handoff'] as const;
const DROPS = ['age', 'count', 'unregistered'] as const;
const PUSHES = ['delivered', 'retried', 'given_up'] as const;

/** The inbound inbox's metrics: events stored by kind, dropped by why, webhook pushes by outcome. */
export class InboxMetrics {
  private readonly stored: Counter<'kind'>;
  private readonly drops: Counter<'reason'>;
  private readonly pushes: Counter<'outcome'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.stored = new Counter({ name: 'herald_inbox_events_total', help: 'Inbound events stored in the inbox, by kind', labelNames: ['kind'], registers });
    this.drops = new Counter({ name: 'herald_inbox_dropped_total', help: 'Inbox events dropped, by reason: age or count retention, or the author unregistered (their DMs)', labelNames: ['reason'], registers });
    this.pushes = new Counter({ name: 'herald_inbox_webhook_pushes_total', help: 'Webhook push attempts, by outcome: delivered, retried (5xx, timeout, unreachable), given up', labelNames: ['outcome'], registers });
    for (const kind of KINDS) this.stored.inc({ kind }, 0);
    for (const reason of DROPS) this.drops.inc({ reason }, 0);
    for (const outcome of PUSHES) this.pushes.inc({ outcome }, 0);
  }

  heard(kind: (typeof KINDS)[number]): void {
    this.stored.inc({ kind });
  }

  dropped(reason: (typeof DROPS)[number], n: number): void {
    this.drops.inc({ reason }, n);
  }

  pushed(outcome: (typeof PUSHES)[number]): void {
    this.pushes.inc({ outcome });
  }
}
