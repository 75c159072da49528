import { html } from 'htm/preact';
import { render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, checkToken, fileUrl, subscribe, token, type ArchiveAction, type MediaItem, type ScrapeJob, type StorageStatus } from './api.js';

/**
 * The media archive's operator page (preact + htm, bundled by the project with esbuild): scrapes
 * with live progress, start/stop/delete with a confirm step, the media grid with filters, the
 * storage bar, and the action log. Every call goes to the admin API: the same MediaService as the
 * MCP tools.
 */

const bytes = (n: number): string => (n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
const when = (iso: string): string => iso.slice(0, 16).replace('T', ' ');

/** What people call things: channels by name (from the scrapes), with the id on hover. */
interface Names {
  channels: ReadonlyMap<string, string>;
  /** A scrape id → its channel id. */
  scrapes: ReadonlyMap<string, string>;
}

function namesOf(scrapes: readonly ScrapeJob[]): Names {
  const channels = new Map<string, string>();
  const byScrape = new Map<string, string>();
  for (const s of scrapes) {
    if (s.channelName !== undefined && s.channelName !== null && !channels.has(s.channelId)) channels.set(s.channelId, s.channelName);
    byScrape.set(s.id, s.channelId);
  }
  return { channels, scrapes: byScrape };
}

function Channel({ id, names }: { id: string; names: Names }) {
  const name = names.channels.get(id);
  return html`<span class="channel" data-testid="channel" title=${id}>${name !== undefined ? `#${name}` : id}</span>`;
}

function TokenForm({ notice, onToken }: { notice: string | undefined; onToken: () => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (): Promise<void> => {
    const candidate = value.trim();
    if (candidate === '') {
      setError('Paste the admin token first.');
      return;
    }
    setBusy(true);
    const verdict = await checkToken(candidate);
    setBusy(false);
    if (!verdict.ok) {
      setError(verdict.reason);
      return;
    }
    token.set(candidate);
    onToken();
  };
  return html`<form class="card token" onSubmit=${(e: Event) => {
    e.preventDefault();
    void submit();
  }}>
    <h2>Media archive</h2>
    ${notice !== undefined && error === undefined && html`<p class="notice" data-testid="token-notice">${notice}</p>`}
    <p>Paste the admin token (<code>HERALD_ADMIN_TOKEN</code>; in sandbox mode, the one <code>npm start</code> printed). It is kept in this tab until you sign out or close it.</p>
    <input data-testid="token" type="password" autocomplete="off" aria-invalid=${error !== undefined} value=${value} onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} />
    ${error !== undefined && html`<p class="warning" role="alert" data-testid="token-error">${error}</p>`}
    <button data-testid="token-save" type="submit" disabled=${busy}>${busy ? 'Checking…' : 'Open'}</button>
  </form>`;
}

function StorageBar({ storage }: { storage: StorageStatus | undefined }) {
  if (storage === undefined) return html`<section class="card">Loading storage…</section>`;
  const pct = storage.limitBytes === 0 ? 100 : Math.min(100, (storage.usedBytes / storage.limitBytes) * 100);
  return html`<section class="card" data-testid="storage" data-level=${storage.level}>
    <h2>Storage</h2>
    <div class="bar">
      <div class=${`fill ${storage.level}`} style=${`width:${pct.toFixed(1)}%`}></div>
      <div class="mark warn" style=${`left:${storage.warnPercent}%`} title="warning"></div>
      <div class="mark overrun" style=${`left:${Math.min(100, storage.overrunPercent)}%`} title="downloads pause"></div>
    </div>
    <p data-testid="storage-text">${bytes(storage.usedBytes)} of ${bytes(storage.limitBytes)} (${pct.toFixed(1)}%) · ${storage.level === 'ok' ? 'ok' : storage.level === 'warning' ? `past the warning level (${storage.warnPercent}%): new scrapes need confirming` : `past ${storage.overrunPercent}%: downloads pause`}</p>
    <p class="kinds">${(['image', 'video', 'audio', 'file'] as const).map((k) => html`<span>${k}: ${bytes(storage.byKind[k])}</span> `)}</p>
  </section>`;
}

function StartForm({ onStarted }: { onStarted: () => void }) {
  const [channelId, setChannelId] = useState('');
  const [mode, setMode] = useState<'links' | 'download'>('links');
  const [warning, setWarning] = useState<string | undefined>(undefined);
  const [message, setMessage] = useState<string | undefined>(undefined);
  const start = async (confirm: boolean): Promise<void> => {
    const r = await api<ScrapeJob & { error?: string; warning?: string }>('POST', '/admin/archive/scrapes', { channelId: channelId.trim(), mode, ...(confirm ? { confirm: true } : {}) });
    if (r.status === 428) {
      setWarning(r.body.warning);
      setMessage(undefined);
      return;
    }
    setWarning(undefined);
    const channel = r.body.channelName !== undefined && r.body.channelName !== null ? ` of #${r.body.channelName}` : '';
    setMessage(r.status === 200 ? `Resumed scrape ${r.body.id}${channel}.` : r.status === 201 ? `Started scrape ${r.body.id}${channel}.` : `Refused: ${r.body.error ?? r.status}.`);
    onStarted();
  };
  return html`<section class="card">
    <h2>Start a scrape</h2>
    <form class="row" onSubmit=${(e: Event) => {
      e.preventDefault();
      void start(false);
    }}>
      <input data-testid="start-channel" placeholder="channel id" value=${channelId} onInput=${(e: Event) => setChannelId((e.target as HTMLInputElement).value)} />
      <select data-testid="start-mode" value=${mode} onChange=${(e: Event) => setMode((e.target as HTMLSelectElement).value as 'links' | 'download')}>
        <option value="links">links (metadata and URLs)</option>
        <option value="download">download (store the files)</option>
      </select>
      <button data-testid="start" type="submit">Start</button>
    </form>
    ${warning !== undefined &&
    html`<div class="warning" data-testid="confirm-box">
      <p>${warning}</p>
      <button data-testid="confirm-start" onClick=${() => void start(true)}>Start anyway</button>
      <button onClick=${() => setWarning(undefined)}>Cancel</button>
    </div>`}
    ${message !== undefined && html`<p data-testid="start-message">${message}</p>`}
  </section>`;
}

function Scrapes({ scrapes, names, onChanged, onShow, onErrors }: { scrapes: ScrapeJob[]; names: Names; onChanged: () => void; onShow: (id: string) => void; onErrors: (id: string) => void }) {
  const [confirming, setConfirming] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const act = async (method: string, path: string): Promise<void> => {
    const r = await api<{ error?: string }>(method, path);
    setError(r.status >= 400 ? r.body?.error ?? String(r.status) : undefined);
    setConfirming(undefined);
    onChanged();
  };
  return html`<section class="card">
    <h2>Scrapes</h2>
    ${error !== undefined && html`<p class="warning">${error}</p>`}
    <table data-testid="scrapes">
      <thead><tr><th>Channel</th><th>Mode</th><th>State</th><th>Messages</th><th>Items</th><th>Bytes</th><th>Errors</th><th></th></tr></thead>
      <tbody>
        ${scrapes.map(
          (s) => html`<tr key=${s.id} data-testid="scrape" data-id=${s.id} data-state=${s.state}>
            <td><${Channel} id=${s.channelId} names=${names} /></td>
            <td>${s.mode}</td>
            <td class=${`state ${s.state}`} title=${s.pauseReason ?? s.lastError ?? ''}>${s.state}${s.pauseReason !== null ? ` (${s.pauseReason})` : ''}</td>
            <td data-testid="messages">${s.messagesSeen}</td>
            <td data-testid="items">${s.itemsFound}</td>
            <td>${bytes(s.bytes)}</td>
            <td>${s.errors > 0 ? html`<button class="link" data-testid="errors" title="Show what went wrong" onClick=${() => onErrors(s.id)}>${s.errors}</button>` : '0'}</td>
            <td class="actions">
              <button onClick=${() => onShow(s.id)}>Media</button>
              ${(s.state === 'running' || s.state === 'paused') && html`<button data-testid="stop" onClick=${() => void act('POST', `/admin/archive/scrapes/${s.id}/stop`)}>Stop</button>`}
              ${confirming === s.id
                ? html`<button data-testid="delete-confirm" class="danger" onClick=${() => void act('DELETE', `/admin/archive/scrapes/${s.id}`)}>Really delete</button><button onClick=${() => setConfirming(undefined)}>Keep</button>`
                : html`<button data-testid="delete" onClick=${() => setConfirming(s.id)}>Delete</button>`}
            </td>
          </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}

/** Why an item shows no picture: it was never stored, or what it is can only be downloaded. */
function reasonOf(item: MediaItem): string {
  switch (item.state) {
    case 'linked':
      return 'not downloaded (links mode)';
    case 'refused':
      return `refused: ${item.error ?? 'no reason given'}`;
    case 'failed':
      return `failed: ${item.error ?? 'no reason given'}`;
    default:
      return `stored${item.contentType !== null ? ` (${item.contentType})` : ''}`;
  }
}

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
    void fileUrl(item.sha256)
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

type FilterName = 'kind' | 'source' | 'scrapeId' | 'channelId' | 'guildId' | 'author' | 'after' | 'before' | 'text';
type Filters = Partial<Record<FilterName, string>>;

const PAGE = 60;
interface Span {
  items: MediaItem[];
  cursor: string | null;
}

/** One or more pages of items from `from`, until `want` items or the end. A string: what went wrong. */
async function itemsFrom(query: URLSearchParams, want: number, from: string | null): Promise<Span | string> {
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

function filterQuery(filters: Filters): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v !== undefined && v !== '') q.set(k, v);
  return q;
}

/**
 * The grid, refreshed whenever `progress` changes (a scrape it shows recorded a page, ended, or
 * went away): the pages already shown are read again, so nothing the operator scrolled to is lost.
 */
function MediaGrid({ filters, setFilters, progress, names }: { filters: Filters; setFilters: (f: Filters) => void; progress: string; names: Names }) {
  const [view, setView] = useState<Span>({ items: [], cursor: null });
  const [error, setError] = useState<string | undefined>(undefined);
  // Read by the async loads: the newest filters and view, and a generation that a new filter or
  // "More" bumps, so an answer to an older question is dropped.
  const state = useRef({ filters, view, generation: 0, refreshing: false, again: false });
  state.current.filters = filters;
  state.current.view = view;
  const show = (generation: number, r: Span | string, append: boolean): void => {
    if (generation !== state.current.generation) return;
    if (typeof r === 'string') {
      setError(r);
      return;
    }
    setError(undefined);
    setView((old) => (append ? { items: [...old.items, ...r.items], cursor: r.cursor } : r));
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
  const [draft, setDraft] = useState<Filters>(filters);
  useEffect(() => setDraft(filters), [filterKey]);
  const field = (name: FilterName, placeholder: string) =>
    html`<input data-testid=${`filter-${name}`} placeholder=${placeholder} value=${draft[name] ?? ''} onInput=${(e: Event) => setDraft({ ...draft, [name]: (e.target as HTMLInputElement).value })} />`;
  return html`<section class="card">
    <h2>Media</h2>
    <form class="row filters" onSubmit=${(e: Event) => {
      e.preventDefault();
      setFilters(draft);
    }}>
      <select data-testid="filter-kind" value=${draft.kind ?? ''} onChange=${(e: Event) => setDraft({ ...draft, kind: (e.target as HTMLSelectElement).value })}>
        <option value="">any kind</option><option value="image">image</option><option value="video">video</option><option value="audio">audio</option><option value="file">file</option>
      </select>
      <select data-testid="filter-source" value=${draft.source ?? ''} onChange=${(e: Event) => setDraft({ ...draft, source: (e.target as HTMLSelectElement).value })}>
        <option value="">any source</option><option value="attachment">attachment</option><option value="embed">embed</option><option value="link">link</option>
      </select>
      ${field('scrapeId', 'scrape id')} ${field('channelId', 'channel id')} ${field('guildId', 'guild id')} ${field('author', 'author id')}
      ${field('after', 'after (2025-01-01)')} ${field('before', 'before')} ${field('text', 'text in message')}
      <button data-testid="filter-apply" type="submit">Filter</button>
      <button type="button" onClick=${() => setFilters({})}>Clear</button>
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

/** What went wrong in one scrape: its refused and failed items with their reasons, and its last step error. */
function ErrorList({ scrape, names, onClose }: { scrape: ScrapeJob; names: Names; onClose: () => void }) {
  const [view, setView] = useState<Span>({ items: [], cursor: null });
  const [error, setError] = useState<string | undefined>(undefined);
  const query = new URLSearchParams({ scrapeId: scrape.id, state: 'refused,failed' });
  const load = async (from: string | null): Promise<void> => {
    const r = await itemsFrom(query, from === null ? Math.max(50, view.items.length) : 50, from);
    if (typeof r === 'string') {
      setError(r);
      return;
    }
    setError(undefined);
    setView((old) => (from === null ? r : { items: [...old.items, ...r.items], cursor: r.cursor }));
  };
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

function ActionLog({ refresh, names }: { refresh: number; names: Names }) {
  const [actions, setActions] = useState<ArchiveAction[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const load = async (from: string | null): Promise<void> => {
    const r = await api<{ actions: ArchiveAction[]; nextCursor: string | null }>('GET', `/admin/archive/actions?limit=20${from !== null ? `&cursor=${from}` : ''}`);
    if (r.status !== 200) return;
    setActions((old) => (from === null ? r.body.actions : [...old, ...r.body.actions]));
    setCursor(r.body.nextCursor);
  };
  useEffect(() => void load(null), [refresh]);
  const target = (t: string | null) => {
    if (t === null) return '';
    const channel = names.scrapes.get(t);
    if (channel !== undefined) return html`<span title=${t}>scrape of <${Channel} id=${channel} names=${names} /></span>`;
    return html`<${Channel} id=${t} names=${names} />`;
  };
  return html`<section class="card">
    <h2>Action log</h2>
    <p class="hint">What changed the archive, and every refused call: by this page, agents and <code>/media</code> in Discord. Reads are not logged. Kept 8 days.</p>
    <table data-testid="actions">
      <thead><tr><th>When</th><th>Who</th><th>Via</th><th>What</th><th>Target</th><th>Result</th></tr></thead>
      <tbody>
        ${actions.map(
          (a) => html`<tr key=${a.id} data-testid="action" data-action=${a.action} data-result=${a.result}>
            <td>${a.at.replace('T', ' ').slice(0, 19)}</td><td>${a.actor}</td><td>${a.via}</td><td>${a.action}</td><td>${target(a.target)}</td><td title=${a.detail ?? ''}>${a.result}${a.detail !== null ? `: ${a.detail}` : ''}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${cursor !== null && html`<button data-testid="actions-more" onClick=${() => void load(cursor)}>Older</button>`}
  </section>`;
}

/** What the grid shows changed: the counters and states of the scrapes its filters cover. */
function progressOf(scrapes: readonly ScrapeJob[], filters: Filters): string {
  return scrapes
    .filter((s) => (filters.scrapeId === undefined || filters.scrapeId === '' || s.id === filters.scrapeId) && (filters.channelId === undefined || filters.channelId === '' || s.channelId === filters.channelId))
    .map((s) => `${s.id}:${s.state}:${s.itemsFound}:${s.errors}`)
    .join(',');
}

function App() {
  const [authed, setAuthed] = useState(token.get() !== null);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [scrapes, setScrapes] = useState<ScrapeJob[]>([]);
  const [storage, setStorage] = useState<StorageStatus | undefined>(undefined);
  const [live, setLive] = useState(false);
  const [filters, setFilters] = useState<Filters>({});
  const [errorsOf, setErrorsOf] = useState<string | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const signOut = (why: string): void => {
    token.clear();
    setNotice(why);
    setAuthed(false);
  };
  const reload = useCallback(async (): Promise<void> => {
    const [list, store] = await Promise.all([api<{ scrapes: ScrapeJob[] }>('GET', '/admin/archive/scrapes'), api<StorageStatus>('GET', '/admin/archive/storage')]);
    if (list.status === 401) {
      signOut('The saved token was refused (has HERALD_ADMIN_TOKEN changed?): paste the admin token again.');
      return;
    }
    setScrapes(list.body.scrapes);
    setStorage(store.body);
    setTick((t) => t + 1);
  }, []);
  useEffect(() => {
    if (!authed) return undefined;
    void reload();
    // Progress is pushed by the job queue; the page does not poll.
    return subscribe({
      scrape: (s) =>
        setScrapes((old) => {
          const before = old.find((o) => o.id === s.id);
          // A new scrape or a new state (an agent's start or stop, a scrape ending) is in the action log.
          if (before === undefined || before.state !== s.state) setTick((t) => t + 1);
          return before !== undefined ? old.map((o) => (o.id === s.id ? s : o)) : [s, ...old];
        }),
      storage: setStorage,
      connected: setLive,
    });
  }, [authed]);
  if (!authed)
    return html`<${TokenForm}
      notice=${notice}
      onToken=${() => {
        setNotice(undefined);
        setAuthed(true);
      }}
    />`;
  const names = namesOf(scrapes);
  const failing = errorsOf === undefined ? undefined : scrapes.find((s) => s.id === errorsOf);
  return html`<header><h1>Herald · media archive</h1><span data-testid="live" class=${live ? 'live on' : 'live'}>${live ? 'live' : 'connecting…'}</span>
      <button data-testid="sign-out" onClick=${() => signOut('Signed out: this tab no longer holds the token.')}>Sign out</button></header>
    <main>
      <${StorageBar} storage=${storage} />
      <${StartForm} onStarted=${() => void reload()} />
      <${Scrapes} scrapes=${scrapes} names=${names} onChanged=${() => void reload()} onShow=${(id: string) => setFilters({ scrapeId: id })} onErrors=${setErrorsOf} />
      ${failing !== undefined && html`<${ErrorList} scrape=${failing} names=${names} onClose=${() => setErrorsOf(undefined)} />`}
      <${MediaGrid} filters=${filters} setFilters=${setFilters} progress=${progressOf(scrapes, filters)} names=${names} />
      <${ActionLog} refresh=${tick} names=${names} />
    </main>`;
}

render(html`<${App} />`, document.getElementById('app') as HTMLElement);
