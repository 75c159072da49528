import Router from '@koa/router';
import type { Context } from 'koa';
import { SLACK_SANDBOX_IDS, type SlackConversation, type SlackMessage, type SlackWorkspace } from './state.js';

/**
 * The sandbox's page, served as plain HTML from the server (no script, nothing loaded from
 * elsewhere): `/` shows the workspace, each channel and DM with its members and messages, newest
 * last, with who sent each and the username it was sent under; `/archives/<channel>/p<ts>` (a
 * permalink, as Slack's) shows one message. Message text is escaped; only Slack's `<url|label>`
 * links to http(s) become links, and `<@U…>` mentions show the person's name.
 */

/** Messages shown per conversation on the workspace page (the latest ones). */
const SHOWN_PER_CONVERSATION = 200;

const STYLE = `
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f8f8f8; color: #1d1c1d; }
  header { padding: 12px 20px; background: #3f0e40; color: #fff; }
  header a { color: #fff; }
  h1 { font-size: 18px; margin: 0; }
  main { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 12px; padding: 16px; }
  section { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 10px 14px; }
  h2 { font-size: 15px; margin: 0 0 4px; }
  .id, .meta { color: #616061; font-size: 12px; font-weight: normal; }
  .msg { border-top: 1px solid #eee; padding: 6px 0; }
  .msg.reply { margin-left: 18px; border-left: 3px solid #ddd; padding-left: 8px; }
  .msg:target, .msg.one { background: #fff8d6; }
  .who { font-weight: bold; }
  .as { color: #1264a3; }
  .text { white-space: pre-wrap; word-break: break-word; }
  .empty { color: #616061; font-style: italic; }
  form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 10px 20px; background: #fff; border-bottom: 1px solid #ddd; }
  input, select, button { font: inherit; padding: 3px 8px; }
  input[type=text] { min-width: 320px; }
`;

const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * Where a workspace's page is served: at the root for the sandbox's first workspace (whose page
 * also has the forms people write with), under `/<team id>` for another's (read-only).
 */
export function pageBase(workspace: SlackWorkspace): string {
  return workspace.ids.team === SLACK_SANDBOX_IDS.team ? '' : `/${workspace.ids.team}`;
}

export function pageRoutes(workspace: SlackWorkspace): Router {
  const base = pageBase(workspace);
  const router = base === '' ? new Router() : new Router({ prefix: base });
  router.get('/', (ctx) => {
    const conversations = [...workspace.conversations.values()].sort((a, b) => order(a) - order(b) || label(workspace, a).localeCompare(label(workspace, b)));
    const sections = conversations.map((c) => conversationSection(workspace, c)).join('\n');
    const watching = ctx.query['refresh'] !== undefined;
    const refresh = watching ? `<a href="${base}/">stop refreshing</a>` : `<a href="${base}/?refresh">refresh every 5 seconds</a>`;
    const { domain, team } = workspace.ids;
    html(ctx, 'Herald — Slack sandbox', `<header><h1>Herald — Slack sandbox</h1><div>Workspace ${escape(domain)} (${team}): channels and DMs, newest message last · ${refresh}</div></header>\n${watching || base !== '' ? '' : forms(workspace)}\n<main>\n${sections}\n</main>`, watching);
  });
  router.get('/archives/:channel/:p', (ctx) => {
    const conversation = workspace.conversations.get(ctx.params['channel'] ?? '');
    const ts = /^p(\d{7,})$/.exec(ctx.params['p'] ?? '')?.[1];
    const message = conversation === undefined || ts === undefined ? undefined : workspace.message(conversation.id, `${ts.slice(0, -6)}.${ts.slice(-6)}`);
    if (conversation === undefined || message === undefined) {
      ctx.status = 404;
      html(ctx, 'No such message', `<header><h1>No such message in this Slack sandbox</h1><div><a href="${base}/">The workspace</a></div></header>`);
      return;
    }
    const where = label(workspace, conversation);
    html(ctx, `${where} — Slack sandbox`, `<header><h1>${escape(where)}</h1><div><a href="${base}/#${anchor(conversation, message)}">See it in the workspace</a></div></header>\n<main><section>${messageBlock(workspace, conversation, message, true)}</section></main>`);
  });
  return router;
}

/** A page of the sandbox, with the headers that keep it self-contained; `refresh` reloads it every 5 seconds. */
export function html(ctx: Context, title: string, body: string, refresh = false): void {
  ctx.set('Content-Security-Policy', CSP);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = `<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n${refresh ? '<meta http-equiv="refresh" content="5">\n' : ''}<title>${escape(title)}</title>\n<style>${STYLE}</style>\n</head>\n<body>\n${body}\n</body>\n</html>\n`;
}

/** The forms a person acts with: write a message, run a slash command (people.ts answers them). */
function forms(workspace: SlackWorkspace): string {
  const people = [...workspace.users.values()].filter((u) => !u.is_bot);
  const who = `<select name="user" aria-label="as">${people.map((u) => `<option value="${escape(u.id)}">${escape(u.real_name)}</option>`).join('')}</select>`;
  const channels = [...workspace.conversations.values()].filter((c) => c.kind === 'public' || c.kind === 'private');
  const where = `<select name="channel" aria-label="in">${channels.map((c) => `<option value="${escape(c.id)}">${escape(label(workspace, c))}</option>`).join('')}<option value="${workspace.ids.bot.user}">DM with Herald</option></select>`;
  return [
    `<form method="post" action="/sandbox/say"><label>as ${who}</label><label>in ${where}</label><input type="text" name="text" aria-label="message" required placeholder="a message"><button type="submit">Send</button></form>`,
    `<form method="post" action="/sandbox/slash"><label>as ${who}</label><label>in ${where}</label><input type="text" name="command" aria-label="command" required value="/agent pair "><button type="submit">Run command</button></form>`,
  ].join('\n');
}

/** Channels first, then group DMs, then DMs. */
function order(c: SlackConversation): number {
  return { public: 0, private: 1, mpim: 2, im: 3 }[c.kind];
}

function label(workspace: SlackWorkspace, c: SlackConversation): string {
  if (c.kind === 'im') return `DM with ${nameOf(workspace, c.user ?? '')}`;
  if (c.kind === 'mpim') return `Group DM with ${c.members.map((m) => nameOf(workspace, m)).join(', ')}`;
  return `${c.kind === 'private' ? '🔒' : '#'}${c.name ?? c.id}`;
}

function nameOf(workspace: SlackWorkspace, user: string): string {
  return workspace.users.get(user)?.real_name ?? user;
}

function conversationSection(workspace: SlackWorkspace, c: SlackConversation): string {
  const messages = workspace.messages.get(c.id) ?? [];
  const shown = messages.slice(-SHOWN_PER_CONVERSATION);
  const members = c.members.map((m) => nameOf(workspace, m)).join(', ');
  const hidden = messages.length - shown.length;
  const body = shown.length === 0 ? '<div class="empty">no messages</div>' : shown.map((m) => messageBlock(workspace, c, m, false)).join('\n');
  return `<section id="${escape(c.id)}"><h2>${escape(label(workspace, c))} <span class="id">${escape(c.id)}</span></h2><div class="meta">members: ${escape(members)}</div>${hidden > 0 ? `<div class="meta">${hidden} older messages not shown</div>` : ''}\n${body}</section>`;
}

function anchor(c: SlackConversation, m: SlackMessage): string {
  return `${c.id}-p${m.ts.replace('.', '')}`;
}

function messageBlock(workspace: SlackWorkspace, c: SlackConversation, m: SlackMessage, one: boolean): string {
  const reply = m.thread_ts !== undefined && m.thread_ts !== m.ts;
  const when = new Date(Number(m.ts.split('.')[0]) * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC');
  const as = m.username === undefined ? '' : ` <span class="as">as “${escape(m.username)}”</span>`;
  const meta = [
    escape(when),
    `ts ${escape(m.ts)}`,
    ...(reply ? [`reply in thread ${escape(m.thread_ts ?? '')}`] : []),
    ...(m.edited === undefined ? [] : ['edited']),
    ...(m.reactions === undefined || m.reactions.length === 0 ? [] : [`reactions ${m.reactions.map((r) => `:${escape(r.name)}: ${r.count}`).join(' ')}`]),
    ...(m.metadata === undefined ? [] : [`metadata ${escape(m.metadata.event_type)} ${escape(JSON.stringify(m.metadata.event_payload))}`]),
    `<a href="${pageBase(workspace)}/archives/${escape(c.id)}/p${escape(m.ts.replace('.', ''))}">link</a>`,
  ].join(' · ');
  const classes = ['msg', ...(reply ? ['reply'] : []), ...(one ? ['one'] : [])].join(' ');
  return `<div class="${classes}" id="${escape(anchor(c, m))}"><div><span class="who">${escape(nameOf(workspace, m.user))}</span>${as} <span class="meta">${meta}</span></div><div class="text">${slackText(workspace, m.text)}</div></div>`;
}

/** Message text as HTML: escaped, with Slack's `<https://…|label>` links and `<@U…>` mentions. */
function slackText(workspace: SlackWorkspace, text: string): string {
  return text
    .split(/(<[^<>\n]+>)/)
    .map((part) => {
      const link = /^<(https?:\/\/[^|<>\s]+)(?:\|([^<>]*))?>$/.exec(part);
      if (link !== null) return `<a href="${escape(link[1] ?? '')}" rel="noopener noreferrer">${escape(link[2] ?? link[1] ?? '')}</a>`;
      const mention = /^<@([A-Z0-9]+)(?:\|[^<>]*)?>$/.exec(part);
      if (mention !== null) return `<strong>@${escape(workspace.users.get(mention[1] ?? '')?.name ?? mention[1] ?? '')}</strong>`;
      // Slack sends &, < and > in text as entities: shown as the characters they stand for.
      return escape(part.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'));
    })
    .join('');
}

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}
