import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { escape, html } from './page.js';
import type { SocketMode } from './socket-mode.js';
import { type SlackConversation, type SlackMessage, type SlackWorkspace } from './state.js';

/**
 * What the people of the workspace do: write messages (sent to the app as message events) and
 * invoke slash commands (sent over Socket Mode; the acknowledgement's payload is the reply, and
 * the app may answer later through the command's `response_url`, as on Slack). An `in_channel`
 * reply is posted in the channel by the bot; an ephemeral one is seen by the person only, kept in
 * `replies`. The sandbox page's forms let a person do both from a browser.
 */

export interface CommandReply {
  user: string;
  channel: string;
  command: string;
  response_type: string;
  text: string;
}

/** How long a response_url answers, and how many times (Slack: 30 minutes, 5 times). */
const RESPONSE_URL_MS = 30 * 60_000;
const RESPONSE_URL_USES = 5;

export interface PeopleOptions {
  workspace: SlackWorkspace;
  socketMode: () => SocketMode;
  url: () => string;
  /** A new message in a conversation, to be sent to the app as a message event. */
  posted: (conversation: SlackConversation, message: SlackMessage) => void;
}

export class People {
  /** Every reply to a slash command, in the order given: acknowledgements and response_url posts. */
  readonly replies: CommandReply[] = [];
  private readonly responseUrls = new Map<string, { user: string; channel: string; command: string; uses: number; until: number }>();

  constructor(private readonly options: PeopleOptions) {}

  /** A conversation by id or name; the bot's user id names the person's DM with the bot. */
  conversationFor(user: string, channel: string): SlackConversation | undefined {
    const { workspace } = this.options;
    if (!workspace.users.has(user)) return undefined;
    return channel === workspace.ids.bot.user ? workspace.openDm([user]) : workspace.find(channel);
  }

  say(user: string, channel: string, text: string): string {
    const conversation = this.conversationFor(user, channel);
    if (conversation === undefined) throw new Error('say: unknown user or channel');
    const { workspace } = this.options;
    const message = workspace.append(conversation.id, { ts: workspace.nextTs(), user, text });
    this.options.posted(conversation, message);
    return message.ts;
  }

  async slash(user: string, channel: string, command: string, text: string): Promise<{ response_type?: string; text?: string }> {
    const conversation = this.conversationFor(user, channel);
    const person = this.options.workspace.users.get(user);
    if (conversation === undefined || person === undefined) throw new Error('slash: unknown user or channel');
    const { team, domain, appId } = this.options.workspace.ids;
    const id = randomBytes(12).toString('hex');
    for (const [key, entry] of this.responseUrls) if (entry.until < Date.now() || entry.uses <= 0) this.responseUrls.delete(key);
    this.responseUrls.set(id, { user, channel: conversation.id, command, uses: RESPONSE_URL_USES, until: Date.now() + RESPONSE_URL_MS });
    const ack = await this.options.socketMode().deliver('slash_commands', {
      token: 'sandbox-verification-token',
      team_id: team,
      team_domain: domain,
      channel_id: conversation.id,
      channel_name: conversation.kind === 'im' ? 'directmessage' : (conversation.name ?? conversation.id),
      user_id: person.id,
      user_name: person.name,
      command,
      text,
      api_app_id: appId,
      is_enterprise_install: 'false',
      response_url: `${this.options.url()}/commands/${team}/${id}`,
      trigger_id: `${Date.now()}.${randomBytes(6).toString('hex')}`,
    });
    const reply: { response_type?: string; text?: string } = {};
    if (typeof ack['response_type'] === 'string') reply.response_type = ack['response_type'];
    if (typeof ack['text'] === 'string') reply.text = ack['text'];
    if (reply.text !== undefined) this.reply({ user, channel: conversation.id, command, response_type: reply.response_type ?? 'ephemeral', text: reply.text });
    return reply;
  }

  routes(): Router {
    const router = new Router();
    router.post('/commands/:team/:id', async (ctx) => {
      const target = this.responseUrls.get(ctx.params['id'] ?? '');
      if (target === undefined || target.until < Date.now() || target.uses <= 0) {
        ctx.status = 404;
        ctx.body = { ok: false, error: 'expired_url' };
        return;
      }
      target.uses -= 1;
      const body = await readBody(ctx);
      const text = typeof body['text'] === 'string' ? body['text'] : '';
      const type = body['response_type'] === 'in_channel' ? 'in_channel' : 'ephemeral';
      this.reply({ user: target.user, channel: target.channel, command: target.command, response_type: type, text });
      ctx.body = { ok: true };
    });
    // The page's forms; only from the page itself (a form on another site cannot act for a person here).
    router.post('/sandbox/say', async (ctx) => {
      if (!sameOrigin(ctx)) return;
      const body = await readBody(ctx);
      try {
        const ts = this.say(String(body['user']), String(body['channel']), String(body['text'] ?? ''));
        const conversation = this.conversationFor(String(body['user']), String(body['channel']));
        ctx.status = 303;
        ctx.redirect(`/#${conversation?.id ?? ''}-p${ts.replace('.', '')}`);
      } catch (err) {
        ctx.status = 400;
        html(ctx, 'Not sent', `<header><h1>Not sent</h1><div>${escape((err as Error).message)} · <a href="/">back</a></div></header>`);
      }
    });
    router.post('/sandbox/slash', async (ctx) => {
      if (!sameOrigin(ctx)) return;
      const body = await readBody(ctx);
      const [command = '', ...words] = String(body['command'] ?? '').trim().split(/\s+/);
      let answer: string;
      try {
        if (!command.startsWith('/')) throw new Error('a command starts with /');
        const reply = await this.slash(String(body['user']), String(body['channel']), command, words.join(' '));
        answer = reply.text === undefined ? 'The app acknowledged without a reply.' : `${reply.response_type === 'in_channel' ? 'Posted in the channel' : 'Only visible to you'}: ${reply.text}`;
      } catch (err) {
        ctx.status = 400;
        answer = `No reply: ${(err as Error).message}`;
      }
      html(ctx, 'Slash command', `<header><h1>${escape(command)}</h1><div><a href="/">back to the workspace</a></div></header>\n<main><section><div class="text">${escape(answer)}</div></section></main>`);
    });
    return router;
  }

  private reply(reply: CommandReply): void {
    this.replies.push(reply);
    if (reply.response_type !== 'in_channel') return;
    const { workspace } = this.options;
    const conversation = workspace.conversations.get(reply.channel);
    if (conversation === undefined) return;
    const bot = workspace.ids.bot;
    const message = workspace.append(conversation.id, { ts: workspace.nextTs(), user: bot.user, bot_id: bot.id, text: reply.text });
    this.options.posted(conversation, message);
  }
}

function sameOrigin(ctx: Context): boolean {
  const origin = ctx.get('origin');
  const site = ctx.get('sec-fetch-site');
  if ((origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) || (site !== '' && site !== 'same-origin' && site !== 'none')) {
    ctx.status = 403;
    ctx.body = 'cross-origin requests are refused';
    return false;
  }
  return true;
}

/** A form-encoded or JSON body as an object; empty when it is neither. */
async function readBody(ctx: Context): Promise<Record<string, unknown>> {
  const text = await getRawBody(ctx.req, { limit: 1_048_576, encoding: 'utf-8' }).catch(() => '');
  if (ctx.is('application/json') === 'application/json') {
    try {
      const value = JSON.parse(text) as unknown;
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  }
  return Object.fromEntries(new URLSearchParams(text));
}
