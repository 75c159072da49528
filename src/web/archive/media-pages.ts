import { useState } from 'preact/hooks';
import { api, type MediaItem, type ScrapeJob } from './api.js';

/** Reading the media list page by page, for the grid and for a scrape's error list. */

export type FilterName = 'kind' | 'source' | 'scrapeId' | 'channelId' | 'guildId' | 'author' | 'after' | 'before' | 'text';
export type Filters = Partial<Record<FilterName, string>>;

export const PAGE = 60;
export interface Span {
  items: MediaItem[];
  cursor: string | null;
}

/** One or more pages of items from `from`, until `want` items or the end. A string: what went wrong. */
export async function itemsFrom(query: URLSearchParams, want: number, from: string | null): Promise<Span | string> {
  const items: MediaItem[] = [];
  let cursor = from;
  do {
    const q = new URLSearchParams(query);
    q.set('limit', String(Math.min(200, Math.max(1, want - items.length))));
    if (cursor !== null) q.set('cursor', cursor);
    const r = await api<{ items: MediaItem[]; nextCursor: string | null; error?: string }>('GET', `/admin/archive/media?${q.toString()}`);
    if (r.status !== 200) return r.body.error ?? String(r.status);
    items.push(...r.body.items);
    cursor = r.body.nextCursor;
  } while (cursor !== null && items.length < want);
  return { items, cursor };
}

export function filterQuery(filters: Filters): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v !== undefined && v !== '') q.set(k, v);
  return q;
}

/**
 * The items a list shows and what went wrong loading them. `show` puts a load's answer on the
 * screen: its error, or its items, in place of the ones shown or after them (`append`).
 */
export function useSpan(): { view: Span; error: string | undefined; show: (r: Span | string, append: boolean) => void } {
  const [view, setView] = useState<Span>({ items: [], cursor: null });
  const [error, setError] = useState<string | undefined>(undefined);
  const show = (r: Span | string, append: boolean): void => {
    if (typeof r === 'string') {
      setError(r);
      return;
    }
    setError(undefined);
    setView((old) => (append ? { items: [...old.items, ...r.items], cursor: r.cursor } : r));
  };
  return { view, error, show };
}

/** What the grid shows changed: the counters and states of the scrapes its filters cover. */
export function progressOf(scrapes: readonly ScrapeJob[], filters: Filters): string {
  return scrapes
    .filter((s) => (filters.scrapeId === undefined || filters.scrapeId === '' || s.id === filters.scrapeId) && (filters.channelId === undefined || filters.channelId === '' || s.channelId === filters.channelId))
    .map((s) => `${s.id}:${s.state}:${s.itemsFound}:${s.errors}`)
    .join(',');
}
