import { html } from 'htm/preact';
import type { ScrapeJob } from './api.js';

/** What people call things: channels by name (from the scrapes), with the id on hover. */
export interface Names {
  channels: ReadonlyMap<string, string>;
  /** A scrape id → its channel id. */
  scrapes: ReadonlyMap<string, string>;
}

export function namesOf(scrapes: readonly ScrapeJob[]): Names {
  const channels = new Map<string, string>();
  const byScrape = new Map<string, string>();
  for (const s of scrapes) {
    if (s.channelName !== undefined && s.channelName !== null && !channels.has(s.channelId)) channels.set(s.channelId, s.channelName);
    byScrape.set(s.id, s.channelId);
  }
  return { channels, scrapes: byScrape };
}

export function Channel({ id, names }: { id: string; names: Names }) {
  const name = names.channels.get(id);
  return html`<span class="channel" data-testid="channel" title=${id}>${name !== undefined ? `#${name}` : id}</span>`;
}
