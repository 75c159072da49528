import type { components } from '../../../generated/api.js';

/** The contract's shapes: the same objects the MCP tools return. */
export type ScrapeJob = components['schemas']['ScrapeJob'];
export type MediaItem = components['schemas']['MediaItem'];
export type StorageStatus = components['schemas']['StorageStatus'];
export type ArchiveAction = components['schemas']['ArchiveAction'];

const TOKEN_KEY = 'herald-admin-token';

/** The admin token, kept in this tab only (sessionStorage): a reload keeps it, closing the tab or Sign out forgets it. */
export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (t: string): void => sessionStorage.setItem(TOKEN_KEY, t),
  clear: (): void => sessionStorage.removeItem(TOKEN_KEY),
};

export interface Answer<T> {
  status: number;
  body: T;
}

/** One call of the admin API with the operator's token, labelled `ui` in the action log. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
  const headers: Record<string, string> = { authorization: `Bearer ${token.get() ?? ''}`, 'x-herald-client': 'ui' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, body: (text === '' ? undefined : JSON.parse(text)) as T };
}

/** What the server said of a token the operator pasted. */
export type TokenVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Try a token before keeping it, on the action log: a read only the admin token may make (the
 * bridge token is refused too), and one the log does not record.
 */
export async function checkToken(candidate: string): Promise<TokenVerdict> {
  let res: Response;
  try {
    res = await fetch('/admin/archive/actions?limit=1', { headers: { authorization: `Bearer ${candidate}`, 'x-herald-client': 'ui' } });
  } catch {
    return { ok: false, reason: 'Herald did not answer. Is it running?' };
  }
  await res.body?.cancel();
  if (res.status === 200) return { ok: true };
  if (res.status === 401) return { ok: false, reason: 'That token was refused: this page needs the admin token (HERALD_ADMIN_TOKEN), not the bridge token.' };
  if (res.status === 429) return { ok: false, reason: `Too many refused tokens from this address: try again in ${res.headers.get('retry-after') ?? 'a few'} seconds.` };
  if (res.status === 503) return { ok: false, reason: 'This Herald has no admin token configured (set HERALD_ADMIN_TOKEN and restart it).' };
  return { ok: false, reason: `Herald answered ${res.status}.` };
}

/**
 * Types the page previews: raster images, which a browser only draws. Anything else Herald stored
 * (SVG above all: it can carry script) is never rendered, whatever type the item claims.
 */
const PREVIEWABLE = new Set(['image/png', 'image/apng', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp']);

/**
 * A stored file as a blob URL for a thumbnail (the file route needs the token, which an <img src>
 * cannot send), or undefined when it is not a raster image. Only files Herald stored are ever
 * shown: an item's original URL is never fetched by this page. `signal` drops the download when
 * its thumbnail leaves the grid: the browser opens six connections to Herald at most, and
 * thumbnails nobody sees any more kept the grid's next page waiting behind them.
 */
export async function fileUrl(sha256: string, signal?: AbortSignal): Promise<string | undefined> {
  const res = await fetch(`/admin/archive/files/${sha256}`, { headers: { authorization: `Bearer ${token.get() ?? ''}` }, ...(signal !== undefined ? { signal } : {}) });
  const type = (res.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (!res.ok || !PREVIEWABLE.has(type)) {
    await res.body?.cancel();
    return undefined;
  }
  return URL.createObjectURL(new Blob([await res.arrayBuffer()], { type }));
}

/**
 * The archive's live events (server-sent events, pushed by the job queue as each page is recorded),
 * read with fetch so the token goes in a header. Reconnects after a dropped stream.
 */
export function subscribe(on: { scrape: (s: ScrapeJob) => void; storage: (s: StorageStatus) => void; connected: (c: boolean) => void }): () => void {
  const abort = new AbortController();
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const res = await fetch('/admin/archive/events', { headers: { authorization: `Bearer ${token.get() ?? ''}` }, signal: abort.signal });
        if (!res.ok || res.body === null) throw new Error(`events ${res.status}`);
        on.connected(true);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = 'message';
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('event: ')) event = line.slice(7);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (data === '') continue;
            if (event === 'scrape') on.scrape(JSON.parse(data) as ScrapeJob);
            if (event === 'storage') on.storage(JSON.parse(data) as StorageStatus);
          }
        }
      } catch {
        // Dropped or refused: say so and try again shortly.
      }
      on.connected(false);
      if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 2_000));
    }
  };
  void run();
  return () => abort.abort();
}
