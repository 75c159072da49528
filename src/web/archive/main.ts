import { html } from 'htm/preact';
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ActionLog } from './action-log.js';
import { api, checkToken, subscribe, token, type ScrapeJob, type StorageStatus } from './api.js';
import { ErrorList } from './error-list.js';
import { MediaGrid } from './media-grid.js';
import { progressOf, type Filters } from './media-pages.js';
import { namesOf } from './names.js';
import { Scrapes, StartForm, StorageBar } from './scrapes.js';

/**
 * The media archive's operator page (preact + htm, bundled by the project with esbuild): scrapes
 * with live progress, start/stop/delete with a confirm step, the media grid with filters, the
 * storage bar, and the action log. Every call goes to the admin API: the same MediaService as the
 * MCP tools.
 *
 * This file signs the operator in and lays the panels out; each panel is a file of its own.
 */

/** Asks for the admin token and keeps it only once Herald accepted it. */
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

/** The listed scrapes, each replaced by the copy already shown when that one was updated later. */
function newest(listed: ScrapeJob[], shown: ScrapeJob[]): ScrapeJob[] {
  const byId = new Map(shown.map((s) => [s.id, s]));
  return listed.map((s) => {
    const current = byId.get(s.id);
    return current !== undefined && Date.parse(current.updatedAt) > Date.parse(s.updatedAt) ? current : s;
  });
}

/** The page: the token form until signed in, then the panels, kept current by the live events. */
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
    // A live event may have arrived while the list was being read: keep whichever is newer.
    setScrapes((old) => newest(list.body.scrapes, old));
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
