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
</style>
</head>
<body>
<header><h1>Herald — Discord sandbox</h1><div class="meta">What Herald delivered, refreshed every 2 seconds. Nonces and allowed_mentions are shown as the sandbox received them.</div></header>
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
async function refresh() {
  try { render(await (await fetch('/sandbox/api/state')).json()); } catch (e) { /* try again next tick */ }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
`;
