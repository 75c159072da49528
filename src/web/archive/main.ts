import { html } from 'htm/preact';
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, fileUrl, subscribe, token, type ArchiveAction, type MediaItem, type ScrapeJob, type StorageStatus } from './api.js';

/**
 * The media archive's operator page (preact + htm, bundled by the project with esbuild): scrapes
 * with live progress, start/stop/delete with a confirm step, the media grid with filters, the
 * storage bar, and the action log. Every call goes to the admin API: the same MediaService as the
 * MCP tools.
 */

const bytes = (n: number): string => (n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

function TokenForm({ onToken }: { onToken: () => void }) {
  const [value, setValue] = useState('');
  return html`<form class="card token" onSubmit=${(e: Event) => {
    e.preventDefault();
    token.set(value.trim());
    onToken();
  }}>
    <h2>Media archive</h2>
    <p>Paste the admin token (<code>HERALD_ADMIN_TOKEN</code>; in sandbox mode, the one <code>npm start</code> printed).</p>
    <input data-testid="token" type="password" autocomplete="off" value=${value} onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} />
    <button data-testid="token-save" type="submit">Open</button>
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
    setMessage(r.status === 200 ? `Resumed scrape ${r.body.id}.` : r.status === 201 ? `Started scrape ${r.body.id}.` : `Refused: ${r.body.error ?? r.status}.`);
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

function Scrapes({ scrapes, onChanged, onShow }: { scrapes: ScrapeJob[]; onChanged: () => void; onShow: (id: string) => void }) {
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
          (s) => html`<tr data-testid="scrape" data-id=${s.id} data-state=${s.state}>
            <td>${s.channelId}</td>
            <td>${s.mode}</td>
            <td class=${`state ${s.state}`} title=${s.pauseReason ?? s.lastError ?? ''}>${s.state}${s.pauseReason !== null ? ` (${s.pauseReason})` : ''}</td>
            <td data-testid="messages">${s.messagesSeen}</td>
            <td data-testid="items">${s.itemsFound}</td>
            <td>${bytes(s.bytes)}</td>
            <td>${s.errors}</td>
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

function MediaGrid({ filters, setFilters }: { filters: Filters; setFilters: (f: Filters) => void }) {
  const [items, setItems] = useState<MediaItem[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<string | undefined>(undefined);
  const load = useCallback(
    async (from: string | null): Promise<void> => {
      const q = new URLSearchParams({ limit: '60' });
      for (const [k, v] of Object.entries(filters)) if (v !== undefined && v !== '') q.set(k, v);
      if (from !== null) q.set('cursor', from);
      const r = await api<{ items: MediaItem[]; nextCursor: string | null; error?: string }>('GET', `/admin/archive/media?${q.toString()}`);
      if (r.status !== 200) {
        setError(r.body.error ?? String(r.status));
        return;
      }
      setError(undefined);
      setItems((old) => (from === null ? r.body.items : [...old, ...r.body.items]));
      setCursor(r.body.nextCursor);
    },
    [JSON.stringify(filters)],
  );
  useEffect(() => void load(null), [load]);
  const [draft, setDraft] = useState<Filters>(filters);
  useEffect(() => setDraft(filters), [JSON.stringify(filters)]);
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
      ${items.map(
        (i) => html`<figure key=${i.id} data-testid="media-item" data-id=${i.id} data-kind=${i.kind} data-state=${i.state}>
          <${Thumb} item=${i} />
          <figcaption><a href=${i.messageUrl} target="_blank" rel="noreferrer noopener">${i.authorName ?? i.authorId}</a> · ${i.postedAt.slice(0, 16).replace('T', ' ')}<br />${i.kind} · ${i.source} · ${i.state}</figcaption>
        </figure>`,
      )}
    </div>
    ${cursor !== null && html`<button data-testid="media-more" onClick=${() => void load(cursor)}>More</button>`}
  </section>`;
}

function ActionLog({ refresh }: { refresh: number }) {
  const [actions, setActions] = useState<ArchiveAction[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const load = async (from: string | null): Promise<void> => {
    const r = await api<{ actions: ArchiveAction[]; nextCursor: string | null }>('GET', `/admin/archive/actions?limit=20${from !== null ? `&cursor=${from}` : ''}`);
    if (r.status !== 200) return;
    setActions((old) => (from === null ? r.body.actions : [...old, ...r.body.actions]));
    setCursor(r.body.nextCursor);
  };
  useEffect(() => void load(null), [refresh]);
  return html`<section class="card">
    <h2>Action log</h2>
    <table data-testid="actions">
      <thead><tr><th>When</th><th>Who</th><th>Via</th><th>What</th><th>Target</th><th>Result</th></tr></thead>
      <tbody>
        ${actions.map(
          (a) => html`<tr data-testid="action" data-action=${a.action} data-result=${a.result}>
            <td>${a.at.replace('T', ' ').slice(0, 19)}</td><td>${a.actor}</td><td>${a.via}</td><td>${a.action}</td><td>${a.target ?? ''}</td><td title=${a.detail ?? ''}>${a.result}${a.detail !== null ? `: ${a.detail}` : ''}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${cursor !== null && html`<button data-testid="actions-more" onClick=${() => void load(cursor)}>Older</button>`}
  </section>`;
}

function App() {
  const [authed, setAuthed] = useState(token.get() !== null);
  const [scrapes, setScrapes] = useState<ScrapeJob[]>([]);
  const [storage, setStorage] = useState<StorageStatus | undefined>(undefined);
  const [live, setLive] = useState(false);
  const [filters, setFilters] = useState<Filters>({});
  const [tick, setTick] = useState(0);
  const reload = useCallback(async (): Promise<void> => {
    const [list, store] = await Promise.all([api<{ scrapes: ScrapeJob[] }>('GET', '/admin/archive/scrapes'), api<StorageStatus>('GET', '/admin/archive/storage')]);
    if (list.status === 401) {
      token.clear();
      setAuthed(false);
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
      scrape: (s) => setScrapes((old) => (old.some((o) => o.id === s.id) ? old.map((o) => (o.id === s.id ? s : o)) : [s, ...old])),
      storage: setStorage,
      connected: setLive,
    });
  }, [authed]);
  if (!authed) return html`<${TokenForm} onToken=${() => setAuthed(true)} />`;
  return html`<header><h1>Herald · media archive</h1><span data-testid="live" class=${live ? 'live on' : 'live'}>${live ? 'live' : 'connecting…'}</span>
      <button onClick=${() => {
        token.clear();
        setAuthed(false);
      }}>Sign out</button></header>
    <main>
      <${StorageBar} storage=${storage} />
      <${StartForm} onStarted=${() => void reload()} />
      <${Scrapes} scrapes=${scrapes} onChanged=${() => void reload()} onShow=${(id: string) => setFilters({ scrapeId: id })} />
      <${MediaGrid} filters=${filters} setFilters=${setFilters} />
      <${ActionLog} refresh=${tick} />
    </main>`;
}

render(html`<${App} />`, document.getElementById('app') as HTMLElement);
