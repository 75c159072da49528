import { html } from 'htm/preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { fileUrl, type MediaItem } from './api.js';
import { reasonOf, when } from './format.js';
import { filterQuery, itemsFrom, PAGE, useSpan, type FilterName, type Filters, type Span } from './media-pages.js';
import { Channel, type Names } from './names.js';

/**
 * A stored raster image, fetched from Herald with the token; anything else is a placeholder that
 * says why, with the original URL as text: the page never makes the browser fetch it.
 */
function Thumb({ item }: { item: MediaItem }) {
  const [src, setSrc] = useState<string | undefined>(undefined);
  const [loading, setLoading] = useState(item.kind === 'image' && item.sha256 !== null);
  useEffect(() => {
    setSrc(undefined);
    setLoading(item.kind === 'image' && item.sha256 !== null);
    if (item.kind !== 'image' || item.sha256 === null) return undefined;
    let url: string | undefined;
    let live = true;
    const abort = new AbortController();
    void fileUrl(item.sha256, abort.signal)
      .catch(() => undefined)
      .then((u) => {
        url = u;
        if (!live) {
          if (u !== undefined) URL.revokeObjectURL(u);
          return;
        }
        setSrc(u);
        setLoading(false);
      });
    return () => {
      live = false;
      abort.abort();
      if (url !== undefined) URL.revokeObjectURL(url);
    };
  }, [item.id, item.sha256]);
  if (src !== undefined) return html`<img loading="lazy" alt=${item.filename ?? ''} src=${src} />`;
  return html`<div class="placeholder" data-testid="placeholder">
    <span class="kind">${item.kind}</span>
    <span class="why" data-testid="reason">${loading ? 'loading…' : reasonOf(item)}</span>
    <code class="url" data-testid="url" title=${item.url}>${item.url}</code>
  </div>`;
}

/**
 * The grid, refreshed whenever `progress` changes (a scrape it shows recorded a page, ended, or
 * went away): the pages already shown are read again, so nothing the operator scrolled to is lost.
 */
export function MediaGrid({ filters, setFilters, progress, names }: { filters: Filters; setFilters: (f: Filters) => void; progress: string; names: Names }) {
  const { view, error, show: put } = useSpan();
  // Read by the async loads: the newest filters and view, and a generation that a new filter or
  // "More" bumps, so an answer to an older question is dropped.
  const state = useRef({ filters, view, generation: 0, refreshing: false, again: false });
  state.current.filters = filters;
  state.current.view = view;
  const show = (generation: number, r: Span | string, append: boolean): void => {
    if (generation === state.current.generation) put(r, append);
  };
  const filterKey = JSON.stringify(filters);
  useEffect(() => {
    const generation = ++state.current.generation;
    void itemsFrom(filterQuery(filters), PAGE, null).then((r) => show(generation, r, false));
  }, [filterKey]);
  const refresh = useCallback(async (): Promise<void> => {
    const s = state.current;
    if (s.refreshing) {
      s.again = true;
      return;
    }
    s.refreshing = true;
    try {
      do {
        s.again = false;
        const generation = s.generation;
        show(generation, await itemsFrom(filterQuery(s.filters), Math.max(PAGE, s.view.items.length), null), false);
      } while (s.again);
    } finally {
      s.refreshing = false;
    }
  }, []);
  const seen = useRef(progress);
  useEffect(() => {
    if (seen.current === progress) return;
    seen.current = progress;
    void refresh();
  }, [progress]);
  const more = (): void => {
    const generation = ++state.current.generation;
    void itemsFrom(filterQuery(filters), PAGE, view.cursor).then((r) => show(generation, r, true));
  };
  // The form's newest values, written as each event arrives: a change, an input and the submit can
  // all come before the next render, and each must build on the one before, not on the draft an
  // older render saw (a select then typing then Enter, quickly, lost the select). Filters set from
  // outside (Clear, a scrape's Media button) replace them in the render that shows them, not in an
  // effect after it, so an edit made meanwhile is not overwritten.
  const latest = useRef(filters);
  const shownKey = useRef(filterKey);
  if (shownKey.current !== filterKey) {
    shownKey.current = filterKey;
    latest.current = filters;
  }
  const [, redraw] = useState(0);
  const draft = latest.current;
  const edit = (name: FilterName, value: string): void => {
    latest.current = { ...latest.current, [name]: value };
    redraw((n) => n + 1);
  };
  const clear = (): void => {
    // Also when the filters applied are already none: what was typed and not applied goes too.
    latest.current = {};
    redraw((n) => n + 1);
    setFilters({});
  };
  const field = (name: FilterName, placeholder: string) =>
    html`<input data-testid=${`filter-${name}`} placeholder=${placeholder} value=${draft[name] ?? ''} onInput=${(e: Event) => edit(name, (e.target as HTMLInputElement).value)} />`;
  return html`<section class="card">
    <h2>Media</h2>
    <form class="row filters" onSubmit=${(e: Event) => {
      e.preventDefault();
      setFilters(latest.current);
    }}>
      <select data-testid="filter-kind" value=${draft.kind ?? ''} onChange=${(e: Event) => edit('kind', (e.target as HTMLSelectElement).value)}>
        <option value="">any kind</option><option value="image">image</option><option value="video">video</option><option value="audio">audio</option><option value="file">file</option>
      </select>
      <select data-testid="filter-source" value=${draft.source ?? ''} onChange=${(e: Event) => edit('source', (e.target as HTMLSelectElement).value)}>
        <option value="">any source</option><option value="attachment">attachment</option><option value="embed">embed</option><option value="link">link</option>
      </select>
      ${field('scrapeId', 'scrape id')} ${field('channelId', 'channel id')} ${field('guildId', 'guild id')} ${field('author', 'author id')}
      ${field('after', 'after (2025-01-01)')} ${field('before', 'before')} ${field('text', 'text in message')}
      <button data-testid="filter-apply" type="submit">Filter</button>
      <button type="button" onClick=${clear}>Clear</button>
    </form>
    ${error !== undefined && html`<p class="warning" data-testid="media-error">${error}</p>`}
    <div class="grid" data-testid="media-grid">
      ${view.items.map(
        (i) => html`<figure key=${i.id} data-testid="media-item" data-id=${i.id} data-kind=${i.kind} data-state=${i.state}>
          <${Thumb} item=${i} />
          <figcaption><span data-testid="author" title=${i.authorId}>${i.authorName ?? i.authorId}</span> in <${Channel} id=${i.channelId} names=${names} /> · <a href=${i.messageUrl} target="_blank" rel="noreferrer noopener">${when(i.postedAt)}</a><br />${i.kind} · ${i.source} · ${i.state}</figcaption>
        </figure>`,
      )}
    </div>
    ${view.cursor !== null && html`<button data-testid="media-more" onClick=${more}>More</button>`}
  </section>`;
}
