import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import Koa from 'koa';
import { clientCaused, errorSummary } from '../../../infra/errors.js';
import { chatMethods } from './chat.js';
import { workspaceMethods } from './conversations.js';
import { FaultQueue, RateLimits, type SlackFaults } from './limits.js';
import { pageRoutes } from './page.js';
import { People, type CommandReply } from './people.js';
import { SocketMode } from './socket-mode.js';
import { SLACK_SANDBOX_IDS, SlackWorkspace, workspaceIds, type SlackConversation, type SlackIds, type SlackMessage, type SlackMetadata } from './state.js';
import { messageObject, webApiRoutes, type Installed } from './web-api.js';
import { SandboxOAuth } from './oauth.js';

export { SLACK_SANDBOX_IDS, workspaceIds };
export type { CommandReply, SlackFaults, SlackIds, SlackMessage, SlackMetadata };

/** Another workspace the sandbox's app is installed in (SlackSandbox.addWorkspace). */
export interface OtherWorkspace {
  readonly name: string;
  readonly ids: SlackIds;
  /**
   * Its bot's token (xoxb-…): the Web API answers it as that workspace's bot. A workspace added
   * `byOAuth` is answered only once the app's OAuth install handed the token over (oauth.v2.access).
   */
  readonly botToken: string;
}

/**
 * A local Slack workspace for Herald's Slack transport, reached by Slack's own clients
 * (@slack/web-api with `slackApiUrl: sandbox.apiUrl`, @slack/socket-mode with
 * `clientOptions: { slackApiUrl: sandbox.apiUrl }`): the Web API methods Herald uses, Socket Mode
 * (slash commands, message events), rate limits, fault injection, and a page showing the
 * workspace. Used by sandbox mode and as the test double.
 *
 * This class puts the parts together: the workspace (state.ts), the Web API (web-api.ts with
 * chat.ts and conversations.ts), Socket Mode (socket-mode.ts), faults and limits (limits.ts),
 * served on one port.
 */

export interface SlackSandboxOptions {
  /** Keep the workspace (conversations, members, messages) in this JSON file across restarts. Default: in memory only. */
  stateFile?: string;
  /** The clock messages' ts come from (milliseconds). Default Date.now. */
  now?: () => number;
  /** chat.postMessage calls admitted per channel per second. Default 1, as Slack. */
  postsPerSecondPerChannel?: number;
  /** Multiplies every method's per-minute tier limit (e.g. 10 for tests that call a lot). Default 1. */
  tierScale?: number;
}

export class SlackSandbox {
  readonly botToken = `xoxb-sandbox-${randomBytes(12).toString('hex')}`;
  readonly appToken = `xapp-1-sandbox-${randomBytes(12).toString('hex')}`;
  /** The app's OAuth client id and secret (oauth.v2.access checks them). */
  readonly clientId = `${Date.now()}.${randomBytes(6).readUIntBE(0, 6)}`;
  readonly clientSecret = randomBytes(16).toString('hex');
  url = '';
  readonly faults: SlackFaults;
  private readonly faultQueue = new FaultQueue();
  private readonly workspace: SlackWorkspace;
  private readonly limits: RateLimits;
  private readonly counts = { calls: new Map<string, number>(), ratelimited: 0 };
  private server: Server | undefined;
  private socketMode: SocketMode | undefined;
  private readonly people: People;
  /** The other workspaces, by bot token. */
  private readonly others = new Map<string, OtherWorkspace & { workspace: SlackWorkspace; people: People }>();
  private readonly installs = new Map<SlackWorkspace, Installed>();
  private readonly revoked = new Set<string>();
  private readonly pages = new Map<SlackWorkspace, ReturnType<Router['routes']>>();
  /** Bot tokens of workspaces added `byOAuth` that no install has handed over yet: answered invalid_auth. */
  private readonly notIssued = new Set<string>();
  /** Token rotation: each expiring access token handed over, the workspace's bot token it stands for, until when. */
  private readonly rotated = new Map<string, { botToken: string; until: number }>();
  /** Token rotation: each refresh token not spent yet, the workspace's bot token it refreshes. */
  private readonly refreshTokens = new Map<string, string>();
  /** Workspaces with token rotation on, by bot token: how long an access token lives. */
  private readonly rotating = new Map<string, number>();
  private readonly oauth = new SandboxOAuth({
    clientId: this.clientId,
    clientSecret: this.clientSecret,
    workspaces: () => [
      { ids: SLACK_SANDBOX_IDS, botToken: this.botToken, issue: () => undefined },
      // Installed again after an uninstall: its token works again (Slack would hand a new one; the same serves the sandbox).
      ...[...this.others.values()].map((o) => ({
        ids: o.ids,
        botToken: o.botToken,
        issue: () => void (this.notIssued.delete(o.botToken), this.revoked.delete(o.botToken)),
        ...(this.rotating.has(o.botToken) ? { rotate: () => this.rotate(o.botToken), refreshes: (refreshToken: string) => this.refreshTokens.get(refreshToken) === o.botToken && this.refreshTokens.delete(refreshToken) } : {}),
      })),
    ],
  });

  constructor(private readonly options: SlackSandboxOptions = {}) {
    this.workspace = new SlackWorkspace(options.now ?? Date.now, options.stateFile);
    // Rate windows run on the real clock, whatever clock messages use.
    this.limits = new RateLimits(Date.now, options.postsPerSecondPerChannel ?? 1, options.tierScale ?? 1);
    this.faults = this.faultQueue;
    this.people = new People({ workspace: this.workspace, socketMode: () => this.mode(), url: () => this.url, posted: (c, m) => this.sendMessageEvent(this.workspace, c, m) });
  }

  /** The base URL for @slack/web-api's `slackApiUrl`. */
  get apiUrl(): string {
    return `${this.url}/api/`;
  }

  /** Slack's authorize page for the app's OAuth install (`/oauth/v2/authorize`), on the sandbox's page origin. */
  get authorizeUrl(): string {
    return `${this.url}/oauth/v2/authorize`;
  }

  /** The workspace URL auth.test answers, and permalinks start with. */
  get workspaceUrl(): string {
    return `${this.url}/`;
  }

  /** How many calls a method got (whatever their answer). */
  calls(method: string): number {
    return this.counts.calls.get(method) ?? 0;
  }

  /** How many 429s were answered. */
  get ratelimited(): number {
    return this.counts.ratelimited;
  }

  /** Whether an app is connected over Socket Mode. */
  connected(): boolean {
    return this.socketMode?.connected() ?? false;
  }

  /** Socket Mode connections open now (one per app process connected). */
  get socketConnections(): number {
    return this.socketMode?.connections() ?? 0;
  }

  /**
   * Install the app in one more workspace, `name` (its ids: state.ts workspaceIds), with a bot of
   * its own: its token reaches that workspace's channels and people only, as a second
   * workspace's installation does on Slack. Its page is at `/<team id>/`. Names are unique.
   * `byOAuth`: the app is not installed there yet; its token works once an OAuth install
   * (`/oauth/v2/authorize`, then oauth.v2.access) handed it to the app.
   */
  addWorkspace(name: string, options: { byOAuth?: boolean; rotatingMs?: number } = {}): OtherWorkspace {
    if ([...this.others.values()].some((o) => o.name === name)) throw new Error(`the Slack sandbox already has a workspace named ${name}`);
    const n = this.others.size + 2;
    if (n > 99) throw new Error('the Slack sandbox holds at most 98 other workspaces');
    const ids = workspaceIds(n, name);
    const stateFile = this.options.stateFile === undefined ? undefined : `${this.options.stateFile.replace(/\.json$/, '')}-${name}.json`;
    const workspace = new SlackWorkspace(this.options.now ?? Date.now, stateFile, ids, `W${String(n).padStart(2, '0')}`);
    const people = new People({ workspace, socketMode: () => this.mode(), url: () => this.url, posted: (c, m) => this.sendMessageEvent(workspace, c, m) });
    const other = { name, ids, botToken: `xoxb-sandbox-${randomBytes(12).toString('hex')}`, workspace, people };
    this.others.set(other.botToken, other);
    if (options.byOAuth === true) this.notIssued.add(other.botToken);
    // Token rotation on: an install hands over expiring access tokens (xoxe.xoxb-…) and a refresh token, never the bot token itself.
    if (options.byOAuth === true && options.rotatingMs !== undefined) this.rotating.set(other.botToken, options.rotatingMs);
    return { name, ids, botToken: other.botToken };
  }

  /**
   * The people of workspace `name`: they write in its conversations (`say`, its bot's user id as
   * the channel: their DM with its bot) and run slash commands there (`slash`), which reach the app
   * over its one Socket Mode connection naming that workspace, as Slack's do. Their page is read-only.
   */
  peopleOf(name: string): Pick<People, 'say' | 'slash'> {
    const other = this.other(name);
    return { say: (user, channel, text) => other.people.say(user, channel, text), slash: (user, channel, command, text) => other.people.slash(user, channel, command, text) };
  }

  private other(name: string): OtherWorkspace & { workspace: SlackWorkspace; people: People } {
    const other = [...this.others.values()].find((o) => o.name === name);
    if (other === undefined) throw new Error(`the Slack sandbox has no workspace named ${name}`);
    return other;
  }

  /**
   * The workspace `name` (none: the sandbox's own) uninstalls the app: its bot token is answered
   * token_revoked from now on.
   */
  uninstall(name?: string): void {
    const workspace = name === undefined ? this.workspace : this.other(name).workspace;
    this.revoked.add(name === undefined ? this.botToken : this.other(name).botToken);
    // As Slack does: the app hears it over Socket Mode, naming the workspace (both events; the bot's token among those revoked).
    const { user } = workspace.ids.bot;
    this.sendAppEvent(workspace, { type: 'tokens_revoked', tokens: { oauth: [], bot: [user] }, event_ts: `${Date.now() / 1000}` });
    this.sendAppEvent(workspace, { type: 'app_uninstalled', event_ts: `${Date.now() / 1000}` });
  }

  /** A new expiring access token for a rotating workspace's bot, and a new refresh token for the next. */
  private rotate(botToken: string): { accessToken: string; refreshToken: string; expiresInS: number } {
    const lifetimeMs = this.rotating.get(botToken) ?? 0;
    const accessToken = `xoxe.xoxb-sandbox-${randomBytes(12).toString('hex')}`;
    const refreshToken = `xoxe-1-sandbox-${randomBytes(12).toString('hex')}`;
    this.rotated.set(accessToken, { botToken, until: Date.now() + lifetimeMs });
    this.refreshTokens.set(refreshToken, botToken);
    return { accessToken, refreshToken, expiresInS: Math.max(1, Math.round(lifetimeMs / 1000)) };
  }

  /** The channel's messages, oldest first, as stored (thread replies and metadata included), in whichever workspace holds it. */
  messages(channel: string): SlackMessage[] {
    const holder = [this.workspace, ...[...this.others.values()].map((o) => o.workspace)].find((w) => w.messages.has(channel));
    return structuredClone(holder?.messages.get(channel) ?? []);
  }
  /** Messages deleted with chat.delete, oldest first. */
  deleted(): { channel: string; ts: string; at: string }[] {
    return structuredClone(this.workspace.deleted);
  }

  /**
   * A person invokes a slash command in a channel (or, with the bot's user id as the channel, in
   * their DM with the bot): sent to the connected app over Socket Mode; resolves with its
   * acknowledgement's payload (the reply the person sees), rejects after 3 s without one or when
   * no app is connected.
   */
  slash(user: string, channel: string, command: string, text: string): Promise<{ response_type?: string; text?: string }> {
    return this.people.slash(user, channel, command, text);
  }

  /**
   * A person writes in a channel (or, with the bot's user id as the channel, in their DM with the
   * bot): stored, and sent to the app as a message event if the bot is in that conversation.
   */
  say(user: string, channel: string, text: string): string {
    return this.people.say(user, channel, text);
  }

  /** Every reply to a slash command: acknowledgements with text, and posts to a response_url. */
  commandReplies(): CommandReply[] {
    return structuredClone(this.people.replies);
  }

  /** Ask every connected app to reconnect (`disconnect`, refresh_requested), as Slack does now and then. */
  refreshConnections(): void {
    this.socketMode?.refresh();
  }

  async start(port = 0, host = '127.0.0.1'): Promise<void> {
    const app = new Koa();
    // Not Koa's stack trace on stderr for a client that went away mid-request; one line for the sandbox's own faults.
    app.on('error', (err: unknown) => {
      if (!clientCaused(err)) process.stderr.write(`sandbox request failed: ${errorSummary(err)}\n`);
    });
    const api = webApiRoutes({
      installed: (token) => {
        // A rotating workspace answers only the access tokens it handed over, as its bot.
        const bot = this.rotated.get(token)?.botToken ?? (this.rotating.has(token) ? undefined : token);
        if (bot === undefined || this.notIssued.has(bot)) return undefined;
        const workspace = bot === this.botToken ? this.workspace : this.others.get(bot)?.workspace;
        return workspace === undefined ? undefined : this.install(workspace);
      },
      revoked: (token) => this.revoked.has(this.rotated.get(token)?.botToken ?? token),
      expired: (token) => (this.rotated.get(token)?.until ?? Infinity) <= Date.now(),
      appToken: this.appToken,
      faults: this.faultQueue,
      limits: this.limits,
      counts: this.counts,
      openConnection: (origin) => this.mode().open(origin),
      unauthenticated: { 'oauth.v2.access': (params, ctx) => this.oauth.access(params, ctx.get('authorization')) },
    });
    app.use(api.routes()).use(this.oauth.routes().routes()).use(pageRoutes(this.workspace).routes()).use(this.people.routes().routes());
    // Each other workspace's page, read-only (people write in the first workspace), under its team id.
    app.use(async (ctx, next) => {
      const other = [...this.others.values()].find((o) => ctx.path === `/${o.ids.team}` || ctx.path.startsWith(`/${o.ids.team}/`));
      if (other === undefined) return next();
      let page = this.pages.get(other.workspace);
      if (page === undefined) this.pages.set(other.workspace, (page = pageRoutes(other.workspace).routes()));
      return page(ctx as Parameters<typeof page>[0], next);
    });
    const server = createServer(app.callback());
    // Idle keep-alive connections are left for the client to close (no idle timeout here, and so no
    // "Keep-Alive: timeout" hint: undici then closes its idle connections after 4 s), as servers
    // behind a load balancer keep theirs longer than clients do. With a server-side timeout, a
    // client could reuse a connection the server was closing at that moment: the request is reset
    // (and a post is left in doubt). close() still ends every connection.
    server.keepAliveTimeout = 0;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.socketMode = new SocketMode(server, SLACK_SANDBOX_IDS.appId, () => this.url);
    const address = server.address() as AddressInfo;
    this.url = `http://${host}:${address.port}`;
  }

  /**
   * Tell connected apps to go, close every connection, stop listening. A SocketModeClient that
   * reconnects by itself would then retry apps.connections.open against a closed port: disconnect
   * it first (`client.disconnect()`), or build it with `autoReconnectEnabled: false`.
   */
  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    await this.socketMode?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** A workspace's Web API methods (made on its first call). */
  private install(workspace: SlackWorkspace): Installed {
    let found = this.installs.get(workspace);
    if (found === undefined) {
      const workspaceUrl = (): string => (workspace === this.workspace ? this.workspaceUrl : `${this.url}/${workspace.ids.team}/`);
      const methods = {
        ...workspaceMethods({ workspace, workspaceUrl }),
        ...chatMethods({ workspace, faults: this.faultQueue, workspaceUrl, posted: (c, m) => this.sendMessageEvent(workspace, c, m) }),
      };
      this.installs.set(workspace, (found = { workspace, methods }));
    }
    return found;
  }

  private mode(): SocketMode {
    if (this.socketMode === undefined) throw new Error('the Slack sandbox is not started');
    return this.socketMode;
  }

  /** The app hears the messages of the conversations its bot is in (its own too), as a message event. */
  /** An event about the app in a workspace (uninstalled, tokens revoked), over Socket Mode when the app is connected. */
  private sendAppEvent(workspace: SlackWorkspace, event: Record<string, unknown>): void {
    const socketMode = this.socketMode;
    if (socketMode === undefined || !socketMode.connected()) return;
    const { team, appId } = workspace.ids;
    socketMode
      .deliver('events_api', { token: 'sandbox-verification-token', team_id: team, api_app_id: appId, event, type: 'event_callback', event_id: `Ev${randomBytes(5).toString('hex').toUpperCase()}`, event_time: Math.floor(Date.now() / 1000) })
      .catch(() => undefined);
  }

  private sendMessageEvent(workspace: SlackWorkspace, conversation: SlackConversation, message: SlackMessage): void {
    const socketMode = this.socketMode;
    if (socketMode === undefined || !socketMode.connected() || !conversation.members.includes(workspace.ids.bot.user)) return;
    // One app: its Socket Mode connection hears every workspace it is installed in, each event naming its team.
    const { team, appId, bot } = workspace.ids;
    const channelType = { public: 'channel', private: 'group', im: 'im', mpim: 'mpim' }[conversation.kind];
    const event = { ...messageObject(message, team, false), channel: conversation.id, channel_type: channelType, event_ts: message.ts };
    // An app that does not acknowledge is not retried here; Slack would retry up to three times.
    socketMode
      .deliver('events_api', {
        token: 'sandbox-verification-token',
        team_id: team,
        context_team_id: team,
        api_app_id: appId,
        event,
        type: 'event_callback',
        event_id: `Ev${randomBytes(5).toString('hex').toUpperCase()}`,
        event_time: Math.floor(Number(message.ts)),
        authorizations: [{ enterprise_id: null, team_id: team, user_id: bot.user, is_bot: true, is_enterprise_install: false }],
        is_ext_shared_channel: false,
      })
      .catch(() => undefined);
  }
}
