import { Counter, type Registry } from 'prom-client';
import { addStatusPanels, periodicFailures } from '../../infra/metrics.js';

/** Lines sent, echoes that confirmed them, reconnects: the IRC link's own counters. */
export class IrcMetrics {
  private readonly sent: Counter<'link'>;
  private readonly confirmed: Counter<'link'>;
  private readonly reconnects: Counter<'link'>;
  /** The hourly prune of stored lines failed (herald_periodic_work_failures_total{what="irc lines"}). */
  readonly pruneFailed: () => void;

  constructor(registry: Registry) {
    const registers = [registry];
    this.sent = new Counter({ name: 'herald_irc_lines_sent_total', help: 'PRIVMSG lines Herald wrote to the IRC server, by link (observer: Herald\'s own nick; sender: an agent\'s nick)', labelNames: ['link'], registers });
    this.confirmed = new Counter({ name: 'herald_irc_echoes_confirmed_total', help: 'Lines the IRC server confirmed with a labeled echo (labeled-response + echo-message), by link', labelNames: ['link'], registers });
    this.reconnects = new Counter({ name: 'herald_irc_reconnects_total', help: 'Times an IRC connection registered again after its link dropped, by link', labelNames: ['link'], registers });
    const failed = periodicFailures(registry);
    failed('irc lines', 0);
    this.pruneFailed = () => failed('irc lines');
    // Present at 0 from the start, so a rate has a first reading.
    for (const link of ['observer', 'sender'] as const) {
      this.sent.inc({ link }, 0);
      this.confirmed.inc({ link }, 0);
      this.reconnects.inc({ link }, 0);
    }
    addStatusPanels(
      registry,
      { section: 'irc', title: 'Lines sent per minute', metric: 'herald_irc_lines_sent_total', show: 'perMinute', unit: '/min' },
      { section: 'irc', title: 'Lines confirmed by echo per minute', metric: 'herald_irc_echoes_confirmed_total', show: 'perMinute', unit: '/min' },
      { section: 'irc', title: 'Reconnects', metric: 'herald_irc_reconnects_total', show: 'sum' },
    );
  }

  line(link: 'observer' | 'sender', confirmed: boolean): void {
    this.sent.inc({ link });
    if (confirmed) this.confirmed.inc({ link });
  }

  reconnected(link: 'observer' | 'sender'): void {
    this.reconnects.inc({ link });
  }
}
