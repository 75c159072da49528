import { Gauge, type Registry } from 'prom-client';
import { addStatusPanels } from '../infra/metrics.js';

/**
 * Whether each long-lived platform link (Discord's gateway, an IRC connection) is up: 1 or 0,
 * read from the link itself at scrape time. A link another replica holds (this one is on standby
 * for it, `herald_singleton_held` 0) has no series here, so a per-instance "link down" alert
 * fires only on the replica that should be connected.
 */
export class LinkMetrics {
  private readonly links = new Map<string, () => boolean | undefined>();

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
          const state = up();
          if (state !== undefined) this.set({ transport, link }, state ? 1 : 0);
        }
      },
    });
  }

  /** Report a link this process holds; `up` is asked at every scrape (undefined: held by another replica; shown on the status page under its transport). */
  track(transport: string, link: string, up: () => boolean | undefined): void {
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
