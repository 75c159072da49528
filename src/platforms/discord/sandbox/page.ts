import { SANDBOX_IDS } from './ids.js';

/**
 * Discord's markdown, parsed in the page into a tree the page turns into DOM nodes with
 * `textContent` and https-only `href`s: nothing a message says is ever parsed as HTML. Plain
 * JavaScript (it runs in the browser as it is); the tests evaluate the same text.
 * Nodes: {t:'text'|'code'|'pre', v} | {t:'b'|'i'|'u'|'s'|'spoiler'|'quote'|'h', c:[nodes]} | {t:'a', href, c:[nodes]}.
 */
export const MARKDOWN_JS = String.raw`function parseMarkdown(src, inline) {
  var out = [];
  var text = '';
  var wrap = function (t) { return function (m) { return { t: t, c: parseMarkdown(m[1], true) }; }; };
  var rules = [
    [/^\\([*_\x60~|\\[\]()>#-])/, function (m) { return { t: 'text', v: m[1] }; }],
    [/^\x60\x60\x60(?:[A-Za-z0-9_+-]*\n)?([\s\S]*?)\x60\x60\x60/, function (m) { return { t: 'pre', v: m[1] }; }],
    [/^\x60\x60([\s\S]+?)\x60\x60|^\x60([^\x60]+?)\x60/, function (m) { return { t: 'code', v: m[1] !== undefined ? m[1] : m[2] }; }],
    [/^\*\*([\s\S]+?)\*\*(?!\*)/, wrap('b')],
    [/^__([\s\S]+?)__(?!_)/, wrap('u')],
    [/^~~([\s\S]+?)~~/, wrap('s')],
    [/^\|\|([\s\S]+?)\|\|/, wrap('spoiler')],
    [/^\*(?!\s)([\s\S]+?)\*(?!\*)/, wrap('i')],
    [/^_(?!\s)([\s\S]+?)_(?![A-Za-z0-9_])/, wrap('i')],
    [/^\[([^\]\n]+)\]\((https:\/\/[^\s)]+)\)/, function (m) { return { t: 'a', href: m[2], c: parseMarkdown(m[1], true) }; }],
    [/^https:\/\/[^\s<]*[^\s<.,:;"')\]]/, function (m) { return { t: 'a', href: m[0], c: [{ t: 'text', v: m[0] }] }; }]
  ];
  var lineStart = !inline;
  while (src.length > 0) {
    var node = null;
    var used = 0;
    if (lineStart) {
      var q = /^(#{1,3}) ([^\n]+)(?:\n|$)|^> ([^\n]*)(?:\n|$)/.exec(src);
      if (q) { node = q[1] ? { t: 'h', c: parseMarkdown(q[2], true) } : { t: 'quote', c: parseMarkdown(q[3], true) }; used = q[0].length; }
    }
    for (var i = 0; node === null && i < rules.length; i++) {
      var m = rules[i][0].exec(src);
      if (m && m[0].length > 0) { node = rules[i][1](m); used = m[0].length; }
    }
    if (node === null) { text += src[0]; lineStart = !inline && src[0] === '\n'; src = src.slice(1); continue; }
    if (text) { out.push({ t: 'text', v: text }); text = ''; }
    out.push(node);
    src = src.slice(used);
    lineStart = !inline && (node.t === 'h' || node.t === 'quote' || node.t === 'pre');
  }
  if (text) out.push({ t: 'text', v: text });
  return out;
}`;

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
  .msg:target { background: #3c3f45; outline: 2px solid #5865f2; }
  .meta a { color: #00a8fc; }
  code, pre { font-family: ui-monospace, monospace; background: #1e1f22; border-radius: 3px; padding: 0 3px; }
  pre { padding: 6px; margin: 4px 0; white-space: pre-wrap; }
  .md-quote { border-left: 3px solid #4e5058; padding-left: 8px; }
  .md-h { font-weight: bold; font-size: 16px; }
  .md-spoiler { background: #1e1f22; color: transparent; border-radius: 3px; cursor: pointer; }
  .md-spoiler.shown { color: inherit; }
  #destinations { padding: 8px 20px; }
  .unmapped { color: #f23f43; }
  .dest { color: #23a55a; font-size: 12px; font-weight: normal; }
  .meta { color: #949ba4; font-size: 12px; }
  .embed { border-left: 4px solid #5865f2; background: #232428; padding: 6px 10px; margin-top: 4px; border-radius: 4px; }
  .btn { display: inline-block; margin: 4px 6px 0 0; padding: 2px 10px; border-radius: 4px; background: #4e5058; color: #fff; text-decoration: none; }
  .empty { color: #949ba4; font-style: italic; }
  .deleted { color: #949ba4; font-style: italic; text-decoration: line-through; }
  .reactions { margin-top: 4px; font-size: 13px; }
  form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 12px 20px; background: #2b2d31; }
  input, select, button { font: inherit; background: #1e1f22; color: #dbdee1; border: 1px solid #3f4147; border-radius: 4px; padding: 4px 8px; }
  input[type=text] { min-width: 360px; }
  button { background: #5865f2; border-color: #5865f2; color: #fff; cursor: pointer; }
  #reply { padding: 8px 20px; white-space: pre-wrap; color: #f2f3f5; }
</style>
</head>
<body>
<header><h1>Herald — Discord sandbox</h1><div class="meta">What Herald delivered, refreshed every 2 seconds; in sandbox mode kept in the data folder (<code>sandbox-discord.json</code>) across restarts. Nonces and allowed_mentions are shown as the sandbox received them.</div></header>
<form id="invoke">
  <label>as <select id="user"></select></label>
  <label><input type="checkbox" id="inGuild" checked> in the sandbox server</label>
  <label><input type="checkbox" id="manage"> with Manage Server</label>
  <label>/<input type="text" id="command" value="agent register" aria-label="command"></label>
  <button type="submit">Run command</button>
  <span class="meta">e.g. <code>agent pair</code>, <code>destinations set destination:alerts channel:${SANDBOX_IDS.channels.alerts}</code></span>
</form>
<form id="write">
  <label>write in <select id="channel"></select></label>
  <input type="text" id="text" aria-label="message" placeholder="a message (mention the bot with &lt;@its id&gt;)">
  <label>reply to <input type="text" id="replyTo" placeholder="message id" aria-label="reply to message id" size="20"></label>
  <button type="submit">Write as the user</button>
</form>
<div id="reply" aria-live="polite"></div>
<div id="destinations" class="meta"></div>
<main id="channels"></main>
<script>
${MARKDOWN_JS}
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
const MD_TAGS = { b: 'strong', i: 'em', u: 'u', s: 's', spoiler: 'span', quote: 'div', h: 'div' };
/** Discord markdown as DOM nodes: text only through textContent, links only to https. */
function markdown(text, cls) {
  const box = el('div', cls || '');
  const append = (parent, nodes) => {
    for (const n of nodes) {
      if (n.t === 'text') parent.append(document.createTextNode(n.v));
      else if (n.t === 'code') parent.append(el('code', '', n.v));
      else if (n.t === 'pre') parent.append(el('pre', '', n.v));
      else if (n.t === 'a') { const a = el('a'); if (n.href.startsWith('https://')) { a.href = n.href; a.rel = 'noopener noreferrer'; a.target = '_blank'; } append(a, n.c); parent.append(a); }
      else { const e = el(MD_TAGS[n.t] || 'span', 'md-' + n.t); if (n.t === 'spoiler') e.onclick = () => e.classList.toggle('shown'); append(e, n.c); parent.append(e); }
    }
  };
  append(box, parseMarkdown(text, false));
  return box;
}
const DESTINATIONS = ['alerts', 'deals', 'digest', 'ops'];
function renderDestinations(state) {
  const box = document.getElementById('destinations');
  box.replaceChildren();
  if (!state.destinations) return;
  for (const g of state.guilds) {
    const line = el('div', '', 'Destinations Herald has mapped in ' + g.name + ' (' + g.id + '): ');
    DESTINATIONS.forEach((d, i) => {
      const m = state.destinations.find((x) => x.guild_id === g.id && x.destination === d);
      const c = m && g.channels.find((ch) => ch.id === m.channel_id);
      // A mapping to another platform (Slack's C0GENERAL01) names that platform, not a channel here.
      const other = m && m.transport && m.transport !== 'discord';
      line.append(m ? el('span', '', other ? d + ' → a ' + m.transport[0].toUpperCase() + m.transport.slice(1) + ' channel (' + m.channel_id + '), not in this sandbox' : d + ' → #' + (c ? c.name : m.channel_id)) : el('span', 'unmapped', d + ': not mapped (posts fail)'));
      if (i < DESTINATIONS.length - 1) line.append(' · ');
    });
    box.append(line);
  }
}
let scrolled = false;
function render(state) {
  renderDestinations(state);
  const root = document.getElementById('channels');
  root.replaceChildren();
  const channels = [];
  for (const g of state.guilds) for (const c of g.channels) if (c.type === 0 || c.type === 11) channels.push({ id: c.id, scope: g.id, title: g.name + ' #' + c.name + (c.type === 11 ? ' (thread)' : ''), name: c.name, thread: c.type === 11, parent: c.type === 11 ? ((g.channels.find((p) => p.id === c.parent_id) || {}).name || c.parent_id) : undefined });
  for (const d of state.dm_channels) channels.push({ id: d.id, scope: '@me', title: 'DM with ' + (d.recipients || []).join(', ') + (d.bot ? ' (with the bot ' + d.bot + ')' : '') });
  for (const ch of channels) {
    const s = el('section');
    const h = el('h2', '', ch.title + ' ');
    h.append(el('span', 'id', ch.id));
    const mapped = (state.destinations || []).filter((x) => x.channel_id === ch.id).map((x) => x.destination);
    if (mapped.length > 0) h.append(el('span', 'dest', ' ← ' + mapped.join(', ')));
    s.append(h);
    const msgs = state.messages.filter((m) => m.channel_id === ch.id);
    if (msgs.length === 0) s.append(el('div', 'empty', 'no messages'));
    for (const m of (state.deleted || []).filter((x) => x.channel_id === ch.id)) {
      const d = el('div', 'msg deleted', 'message ' + m.id + ' was deleted at ' + m.deleted_at + ' (by ' + m.deleted_by + ')');
      d.id = 'm-' + m.id;
      s.append(d);
    }
    for (const m of msgs) {
      const d = el('div', 'msg');
      d.id = 'm-' + m.id;
      const meta = el('div', 'meta', (m.author.global_name || m.author.username) + ' · ' + m.id + ' · ' + m.timestamp + (m.edits ? ' · edited ×' + m.edits : '') + (m.nonce !== undefined ? ' · nonce ' + m.nonce : '') + ' · allowed_mentions ' + JSON.stringify(m.allowed_mentions) + ' · ');
      const link = el('a', '', 'link');
      link.href = '/channels/' + ch.scope + '/' + ch.id + '/' + m.id;
      meta.append(link);
      d.append(meta);
      if (ch.thread) d.append(el('div', 'meta', '🧵 in thread #' + ch.name + ' (under #' + ch.parent + ')'));
      if (m.message_reference) { const r = el('a', 'meta', '↪ replying to message ' + m.message_reference.message_id); r.href = '#m-' + m.message_reference.message_id; d.append(r); }
      if (m.content) d.append(markdown(m.content));
      for (const e of m.embeds) {
        const b = el('div', 'embed');
        if (e.title) b.append(el('strong', '', e.title));
        if (e.description) b.append(markdown(e.description));
        for (const f of e.fields || []) { const fd = el('div', '', f.name + ': '); fd.append(markdown(f.value)); b.append(fd); }
        if (e.footer) b.append(el('div', 'meta', e.footer.text));
        d.append(b);
      }
      for (const row of m.components) for (const c of row.components || []) { const a = el('a', 'btn', c.label); a.href = c.url; a.rel = 'noopener noreferrer'; d.append(a); }
      for (const f of m.attachments || []) {
        const box = el('div', 'attachment');
        if (['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp'].includes(f.content_type)) { const img = document.createElement('img'); img.src = f.url; img.alt = f.description || f.filename; img.style.maxWidth = '320px'; img.style.display = 'block'; box.append(img); }
        const a = el('a', '', '📎 ' + f.filename + ' (' + f.size + ' bytes)'); a.href = f.url; a.rel = 'noopener noreferrer'; box.append(a);
        if (f.description) box.append(el('div', 'meta', f.description));
        d.append(box);
      }
      if (m.reactions && m.reactions.length > 0) d.append(el('div', 'reactions', m.reactions.map((r) => r.emoji + ' ' + r.users.length).join('  ')));
      s.append(d);
    }
    root.append(s);
  }
  const target = location.hash.startsWith('#m-') ? document.getElementById(location.hash.slice(1)) : null;
  if (target && !scrolled) { scrolled = true; target.scrollIntoView({ block: 'center' }); }
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
let knownChannels = '';
/** Where a person can write: the guilds' text channels and threads, and a DM with the bot. */
function renderChannels(state) {
  const options = [];
  for (const g of state.guilds) for (const c of g.channels) if (c.type === 0 || c.type === 11) options.push([c.id, '#' + c.name]);
  options.push(['dm', 'a DM with the bot']);
  const key = options.map((o) => o[0]).join(',');
  if (key === knownChannels) return;
  knownChannels = key;
  const select = document.getElementById('channel');
  const chosen = select.value;
  select.replaceChildren(...options.map(([id, name]) => { const o = el('option', '', name); o.value = id; return o; }));
  if (chosen) select.value = chosen;
  const bot = state.users.find((u) => u.bot);
  const text = document.getElementById('text');
  if (bot && !text.value) text.value = '<@' + bot.id + '> what broke last night?';
}
async function refresh() {
  try { const state = await (await fetch('/sandbox/api/state')).json(); renderUsers(state.users); renderChannels(state); render(state); } catch (e) { /* try again next tick */ }
}
document.getElementById('write').addEventListener('submit', async (event) => {
  event.preventDefault();
  const channel = document.getElementById('channel').value;
  const replyTo = document.getElementById('replyTo').value.trim();
  const body = { userId: document.getElementById('user').value, content: document.getElementById('text').value,
    ...(channel === 'dm' ? { dm: true } : { channelId: channel }), ...(replyTo ? { replyTo } : {}) };
  const res = await fetch('/sandbox/api/messages', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const json = await res.json();
  document.getElementById('reply').textContent = res.ok ? 'written: message ' + json.id : 'error: ' + json.error;
  refresh();
});
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
  if (res.ok) { out.replaceChildren(el('span', 'meta', '(only you can see this) '), markdown((json.data && json.data.content) || '')); }
  else out.textContent = 'error: ' + json.error;
  refresh();
});
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
`;
