import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type ArchiveAction } from './api.js';
import { Channel, type Names } from './names.js';

/** The action log, newest first, read again whenever `refresh` changes, with a button for older pages. */
export function ActionLog({ refresh, names }: { refresh: number; names: Names }) {
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

