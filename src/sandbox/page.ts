import { SANDBOX_IDS } from './ids.js';

/** The sandbox page: what Herald delivered, per channel. Self-contained: it loads nothing from elsewhere. */
export const SANDBOX_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Herald — Discord sandbox</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; background: #313338; color: #dbdee1; }
  header { padding: 12px 20px; background: #1e1f22; }
  h1 { font-size: 16px; margin: 0; }
  main { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 12px; padding: 16px; }
  section { background: #2b2d31; border-radius: 8px; padding: 10px 14px; }
  h2 { font-size: 14px; margin: 0 0 8px; color: #f2f3f5; }
  .id { color: #949ba4; font-size: 12px; font-weight: normal; }
  .msg { border-top: 1px solid #3f4147; padding: 6px 0; white-space: pre-wrap; word-break: break-word; }
  .meta { color: #949ba4; font-size: 12px; }
  .embed { border-left: 4px solid #5865f2; background: #232428; padding: 6px 10px; margin-top: 4px; border-radius: 4px; }
  .btn { display: inline-block; margin: 4px 6px 0 0; padding: 2px 10px; border-radius: 4px; background: #4e5058; color: #fff; text-decoration: none; }
  .empty { color: #949ba4; font-style: italic; }
  form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 12px 20px; background: #2b2d31; }
  input, select, button { font: inherit; background: #1e1f22; color: #dbdee1; border: 1px solid #3f4147; border-radius: 4px; padding: 4px 8px; }
  input[type=text] { min-width: 360px; }
  button { background: #5865f2; border-color: #5865f2; color: #fff; cursor: pointer; }
  #reply { padding: 8px 20px; white-space: pre-wrap; color: #f2f3f5; }
</style>
</head>
<body>
<header><h1>Herald — Discord sandbox</h1><div class="meta">What Herald delivered, refreshed every 2 seconds. Nonces and allowed_mentions are shown as the sandbox received them.</div></header>
<form id="invoke">
  <label>as <select id="user"></select></label>
  <label><input type="checkbox" id="inGuild" checked> in the sandbox server</label>
  <label><input type="checkbox" id="manage"> with Manage Server</label>
  <label>/<input type="text" id="command" value="agent register" aria-label="command"></label>
  <button type="submit">Run command</button>
  <span class="meta">e.g. <code>agent pair</code>, <code>destinations set destination:alerts channel:${SANDBOX_IDS.channels.alerts}</code></span>
</form>
<div id="reply" aria-live="polite"></div>
<main id="channels"></main>
<script>
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
function render(state) {
  const root = document.getElementById('channels');
  root.replaceChildren();
  const channels = [];
  for (const g of state.guilds) for (const c of g.channels) if (c.type === 0) channels.push({ id: c.id, title: g.name + ' #' + c.name });
  for (const d of state.dm_channels) channels.push({ id: d.id, title: 'DM with ' + (d.recipients || []).join(', ') });
  for (const ch of channels) {
    const s = el('section');
    const h = el('h2', '', ch.title + ' ');
    h.append(el('span', 'id', ch.id));
    s.append(h);
    const msgs = state.messages.filter((m) => m.channel_id === ch.id);
    if (msgs.length === 0) s.append(el('div', 'empty', 'no messages'));
    for (const m of msgs) {
      const d = el('div', 'msg');
      d.append(el('div', 'meta', m.id + ' · ' + m.timestamp + (m.edits ? ' · edited ×' + m.edits : '') + (m.nonce !== undefined ? ' · nonce ' + m.nonce : '') + ' · allowed_mentions ' + JSON.stringify(m.allowed_mentions)));
      if (m.content) d.append(el('div', '', m.content));
      for (const e of m.embeds) {
        const b = el('div', 'embed');
        if (e.title) b.append(el('strong', '', e.title));
        if (e.description) b.append(el('div', '', e.description));
        for (const f of e.fields || []) b.append(el('div', '', f.name + ': ' + f.value));
        if (e.footer) b.append(el('div', 'meta', e.footer.text));
        d.append(b);
      }
      for (const row of m.components) for (const c of row.components || []) { const a = el('a', 'btn', c.label); a.href = c.url; a.rel = 'noopener noreferrer'; d.append(a); }
      s.append(d);
    }
    root.append(s);
  }
}
let knownUsers = '';
function renderUsers(users) {
  const humans = users.filter((u) => !u.bot);
  const key = humans.map((u) => u.id).join(',');
  if (key === knownUsers) return;
  knownUsers = key;
  const select = document.getElementById('user');
  const chosen = select.value;
  select.replaceChildren(...humans.map((u) => { const o = el('option', '', (u.global_name || u.username) + ' (' + u.id + ')'); o.value = u.id; return o; }));
  if (chosen) select.value = chosen;
}
async function refresh() {
  try { const state = await (await fetch('/sandbox/api/state')).json(); renderUsers(state.users); render(state); } catch (e) { /* try again next tick */ }
}
document.getElementById('invoke').addEventListener('submit', async (event) => {
  event.preventDefault();
  const words = document.getElementById('command').value.trim().replace(/^[/]/, '').split(/\\s+/);
  const [command, maybeSub, ...rest] = words;
  const options = {};
  let subcommand;
  for (const w of maybeSub === undefined ? [] : [maybeSub, ...rest]) {
    const i = w.indexOf(':');
    if (i > 0) options[w.slice(0, i)] = w.slice(i + 1); else if (subcommand === undefined) subcommand = w;
  }
  const body = { userId: document.getElementById('user').value, command, subcommand, options,
    guildId: document.getElementById('inGuild').checked ? '${SANDBOX_IDS.guild}' : undefined,
    permissions: document.getElementById('manage').checked ? '32' : '0' };
  const out = document.getElementById('reply');
  out.textContent = '…';
  const res = await fetch('/sandbox/api/interactions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const json = await res.json();
  out.textContent = res.ok ? '(only you can see this) ' + ((json.data && json.data.content) || '') : 'error: ' + json.error;
  refresh();
});
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
`;
