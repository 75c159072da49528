import { html } from 'htm/preact';
import { useEffect } from 'preact/hooks';
import type { ScrapeJob } from './api.js';
import { reasonOf, when } from './format.js';
import { itemsFrom, useSpan } from './media-pages.js';
import { Channel, type Names } from './names.js';

/** What went wrong in one scrape: its refused and failed items with their reasons, and its last step error. */
export function ErrorList({ scrape, names, onClose }: { scrape: ScrapeJob; names: Names; onClose: () => void }) {
  const { view, error, show } = useSpan();
  const query = new URLSearchParams({ scrapeId: scrape.id, state: 'refused,failed' });
  // From the start (`from` null) again as many as are shown, else the next page after them.
  const load = async (from: string | null): Promise<void> => show(await itemsFrom(query, from === null ? Math.max(50, view.items.length) : 50, from), from !== null);
  // Again as the scrape finds more.
  useEffect(() => void load(null), [scrape.id, scrape.errors]);
  return html`<section class="card" data-testid="error-list">
    <div class="row"><h2>Errors of the scrape of <${Channel} id=${scrape.channelId} names=${names} /> (${scrape.errors})</h2><button data-testid="error-list-close" onClick=${onClose}>Close</button></div>
    ${error !== undefined && html`<p class="warning">${error}</p>`}
    ${scrape.lastError !== null && html`<p data-testid="last-error">Last failed step: ${scrape.lastError}</p>`}
    <ul class="errors">
      ${view.items.map(
        (i) => html`<li key=${i.id} data-testid="error-item" data-state=${i.state}>
          <span class="reason">${reasonOf(i)}</span><br />
          <code class="url">${i.url}</code><br />
          <span class="meta"><span title=${i.authorId}>${i.authorName ?? i.authorId}</span> · <a href=${i.messageUrl} target="_blank" rel="noreferrer noopener">${when(i.postedAt)}</a></span>
        </li>`,
      )}
    </ul>
    ${view.items.length === 0 && error === undefined && scrape.lastError === null && html`<p>No refused or failed items.</p>`}
    ${view.cursor !== null && html`<button onClick=${() => void load(view.cursor)}>More</button>`}
  </section>`;
}
