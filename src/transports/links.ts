import { Gauge, type Registry } from 'prom-client';
import { addStatusPanels } from '../platform/metrics.js';

/**
 * Whether each long-lived platform link (Discord's gateway, an IRC connection) is up: 1 or 0,
 * read from the link itself at scrape time.
 */
export class LinkMetrics {
  private readonly links = new Map<string, () => boolean>();

  constructor(private readonly registry: Registry) {
    const links = this.links;
    new Gauge({
      name: 'herald_transport_link_up',
      help: 'Whether a platform link this process holds is connected (1) or not (0), by transport and link',
      labelNames: ['transport', 'link'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [key, up] of links) {
          const [transport = '', link = ''] = key.split('\u0000');
          this.set({ transport, link }, up() ? 1 : 0);
        }
      },
    });
  }

  /** Report a link this process holds; `up` is asked at every scrape (and shown on the status page under its transport). */
  track(transport: string, link: string, up: () => boolean): void {
    this.links.set(`${transport}\u0000${link}`, up);
    addStatusPanels(this.registry, {
      section: transport,
      title: `${link} link`,
      metric: 'herald_transport_link_up',
      show: 'up',
      where: (l) => l['transport'] === transport && l['link'] === link,
    });
  }
}
