import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, type ScrapeJob, type StorageStatus } from './api.js';
import { bytes } from './format.js';
import { Channel, type Names } from './names.js';

/** The scrapes panel: the storage bar, starting a scrape (with the confirm step past the warning level), and the list with stop and delete. */

export function StorageBar({ storage }: { storage: StorageStatus | undefined }) {
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

export function StartForm({ onStarted }: { onStarted: () => void }) {
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

export function Scrapes({ scrapes, names, onChanged, onShow, onErrors }: { scrapes: ScrapeJob[]; names: Names; onChanged: () => void; onShow: (id: string) => void; onErrors: (id: string) => void }) {
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

