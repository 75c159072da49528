import { LogLevel, SocketModeClient, type Logger as SlackLogger } from '@slack/socket-mode';
import type { AuthTestResponse, UsersInfoResponse } from '@slack/web-api';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import type { CommandSurface } from '../plugin.js';
import type { Inbound, InboundMessage } from '../platform.js';
import { dateOf } from './slack-chat.js';
import { slackCallerOf, type SlackCall, type SlackClient } from './slack-chat-errors.js';
import { commandLabel, invocationOf, type SlashPayload } from './slack-socket-commands.js';

/**
 * Slack wants every envelope acked within 3 seconds; a slash command's answer rides on its ack.
 * A handler that has not answered by then is acked with a holding line and answered later
 * through the command's response_url.
 */
const ANSWER_IN_ACK_MS = 2_500;
const HOLDING_TEXT = 'Working on it…';
const FAILED_TEXT = 'Something went wrong; try again in a moment.';
const STARTING_TEXT = 'Herald is starting; try again in a moment.';
/** The answer to a command from another workspace the app is installed in (HERALD_SLACK_IDENTITIES): its bot answers none. */
const OTHER_WORKSPACE_TEXT = 'Herald answers commands in its own workspace only.';
/** Messages of people and apps; edits, deletions, joins and the like are not new messages. */
const MESSAGE_SUBTYPES = new Set([undefined, 'bot_message', 'me_message', 'thread_broadcast', 'file_share']);

export interface SlackSocketOptions {
  /** The app-level token (xapp-…, connections:write). */
  appToken: string;
  /** The Web API base, e.g. the sandbox's `apiUrl`; undefined: Slack's own. */
  apiUrl?: string | undefined;
  log: Logger;
  /**
   * The Web API on the bot token (the transport's caller or a WebClient): who Herald is (its own
   * messages are not inbound), and whether an invoker is a workspace admin or owner (users.info).
   * Without it no invoker manages the workspace, and Herald's own messages are told apart by nothing.
   */
  client?: SlackClient | undefined;
  /**
   * Slack says the app was uninstalled from a workspace, or its bot token there revoked
   * (`app_uninstalled`, `tokens_revoked` naming a bot): heard from every workspace the app is in.
   */
  onUninstalled?: ((teamId: string, event: 'app_uninstalled' | 'tokens_revoked', at: Date | undefined) => void) | undefined;
}

/** What @slack/socket-mode hands its `slack_event` listeners: one envelope and its ack. */
interface Envelope {
  ack(response?: Record<string, unknown>): Promise<void>;
  envelope_id?: string;
  type: string;
  body?: { team_id?: string; event?: MessageEvent; event_time?: number } & SlashPayload;
}

interface MessageEvent {
  type?: string;
  subtype?: string;
  channel?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  team?: string;
  /** tokens_revoked: the users whose tokens went (`bot`: the bot's). */
  tokens?: { oauth?: string[]; bot?: string[] };
}

/**
 * Slack's Socket Mode for Herald: the Inbound facet (messages others write where the bot is) and
 * the command surface (slash commands answered by Herald's command router, privately). Slack's
 * own client keeps the connection: it reconnects when Slack asks it to or the socket drops.
 */
export class SlackSocket implements Inbound {
  private readonly socket: SocketModeClient;
  private readonly listeners = new Set<(message: InboundMessage) => void>();
  private commands: CommandSurface | undefined;
  private connected = false;
  /** Whether this process wants the connection now (between start and stop). */
  private wanted = false;
  private starting: Promise<void> | undefined;
  private self: Promise<{ user?: string | undefined; bot?: string | undefined; team?: string | undefined }> | undefined;
  private readonly call: SlackCall | undefined;

  constructor(private readonly o: SlackSocketOptions) {
    this.call = o.client === undefined ? undefined : slackCallerOf(o.client);
    this.socket = new SocketModeClient({
      appToken: o.appToken,
      logger: slackLogger(o.log),
      ...(o.apiUrl !== undefined ? { clientOptions: { slackApiUrl: o.apiUrl } } : {}),
    });
    this.socket.on('connected', () => {
      // Connected after a stop (a start still asking for its URL then): closed again at once.
      if (!this.wanted) void this.socket.disconnect();
      else this.connected = true;
    });
    for (const down of ['disconnecting', 'disconnected', 'reconnecting', 'close']) this.socket.on(down, () => (this.connected = false));
    this.socket.on('slack_event', (envelope: Envelope) => {
      this.onEnvelope(envelope).catch((err: unknown) => o.log.error({ err: errorSummary(err), envelope: envelope.type }, 'Slack envelope could not be handled'));
    });
  }

  /** Whether the Socket Mode connection is up now. */
  get up(): boolean {
    return this.connected;
  }

  /** Connect (once; a failed start may be tried again). Resolves when Slack said hello. */
  start(): Promise<void> {
    this.wanted = true;
    this.starting ??= this.socket.start().then(
      () => undefined,
      (err: unknown) => {
        this.starting = undefined;
        throw err;
      },
    );
    return this.starting;
  }

  onMessage(listener: (message: InboundMessage) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Answer slash commands with `commands` from now on, connecting if not yet connected. */
  async serve(commands: CommandSurface): Promise<void> {
    this.commands = commands;
    await this.start();
  }

  /** Disconnect, and stay disconnected until the next start (no reconnect is attempted meanwhile); listeners stay. */
  async stop(): Promise<void> {
    this.wanted = false;
    this.connected = false;
    this.starting = undefined;
    await this.socket.disconnect();
    this.connected = false;
  }

  /** Disconnect, and stay disconnected (no reconnect is attempted after this). */
  async close(): Promise<void> {
    this.commands = undefined;
    this.listeners.clear();
    await this.stop();
  }

  private async onEnvelope(envelope: Envelope): Promise<void> {
    switch (envelope.type) {
      case 'slash_commands': {
        const own = await this.ownWorkspace(envelope.body?.team_id);
        // Whose workspace it is not known yet (auth.test unanswered): not run, as while starting.
        if (own === undefined) return envelope.ack({ response_type: 'ephemeral', text: STARTING_TEXT });
        if (!own) return envelope.ack({ response_type: 'ephemeral', text: OTHER_WORKSPACE_TEXT });
        return this.answer(envelope);
      }
      case 'events_api':
        // Acked first: Slack resends an envelope not acked in time, and a listener may be slow.
        await envelope.ack();
        if (this.uninstalled(envelope.body?.event, envelope.body?.team_id, envelope.body?.event_time)) return;
        if (envelope.body?.event?.type === 'message' && (await this.ownWorkspace(envelope.body.team_id)) === true) await this.emit(envelope.body.event, envelope.body.team_id);
        return;
      default:
        // Anything else the app is subscribed to (interactivity, options) is not Herald's: acked so Slack does not resend it.
        if (envelope.envelope_id !== undefined) await envelope.ack();
    }
  }

  /** Whether the event says the app left a workspace (told to onUninstalled), from whichever workspace. */
  private uninstalled(event: MessageEvent | undefined, teamId: string | undefined, eventTime: number | undefined): boolean {
    if (teamId === undefined || event === undefined) return false;
    // When Slack says it happened (event_time, whole seconds: an install within that second counts
    // as before it): an install made after it is not undone by it (a late or repeated event).
    const at = typeof eventTime === 'number' && Number.isFinite(eventTime) ? new Date((eventTime + 1) * 1000) : undefined;
    if (event.type === 'app_uninstalled') this.o.onUninstalled?.(teamId, 'app_uninstalled', at);
    else if (event.type === 'tokens_revoked' && (event.tokens?.bot?.length ?? 0) > 0) this.o.onUninstalled?.(teamId, 'tokens_revoked', at);
    else return false;
    return true;
  }

  private async emit(event: MessageEvent, teamId: string | undefined): Promise<void> {
    if (!MESSAGE_SUBTYPES.has(event.subtype) || event.channel === undefined || event.ts === undefined || this.listeners.size === 0) return;
    const self = await this.selfIds();
    if ((event.user !== undefined && event.user === self.user) || (event.bot_id !== undefined && event.bot_id === self.bot)) return;
    const message: InboundMessage = {
      channelId: event.channel,
      messageId: event.ts,
      authorId: event.user ?? event.bot_id ?? '',
      authorIsBot: event.bot_id !== undefined || event.subtype === 'bot_message',
      guildId: teamId ?? event.team,
      // Slack's markup as it came: mentions as <@U…>, & < > escaped (as Discord's raw content).
      content: event.text ?? '',
      createdAt: dateOf(event.ts),
    };
    for (const l of this.listeners) l(message);
  }

  /**
   * Whether an envelope comes from the bot token's workspace. The app's one connection hears every
   * workspace it is installed in; what another workspace's people write or run is not this bot's
   * to hear or answer (it is another identity's, HERALD_SLACK_IDENTITIES): an envelope naming no
   * workspace is not this one's. Undefined while that is not known (auth.test not answered: Slack's
   * Web API failing while the socket is up): then nothing is heard or run, as a message whose author
   * Herald cannot tell apart from itself is not. Without a Web API client (one workspace, nothing to
   * compare): every envelope.
   */
  private async ownWorkspace(teamId: string | undefined): Promise<boolean | undefined> {
    if (this.call === undefined) return true;
    const own = await this.selfIds().then(
      (s) => s.team,
      () => undefined,
    );
    if (own === undefined) return undefined;
    return teamId === own;
  }

  /** Herald's own bot user, bot id and workspace (auth.test), to leave its own messages out. */
  private selfIds(): Promise<{ user?: string | undefined; bot?: string | undefined; team?: string | undefined }> {
    const call = this.call;
    if (call === undefined) return Promise.resolve({});
    this.self ??= call<AuthTestResponse>('auth.test', {}).then((r) => ({ user: r.user_id, bot: r.bot_id, team: r.team_id }));
    this.self.catch(() => (this.self = undefined));
    return this.self;
  }

  /**
   * Run a slash command and answer it privately (ephemeral): in the ack when the handler answers
   * within ANSWER_IN_ACK_MS, else a holding line in the ack and the answer through response_url.
   */
  private async answer(envelope: Envelope): Promise<void> {
    const payload = envelope.body ?? {};
    const commands = this.commands;
    if (commands === undefined) {
      await envelope.ack({ response_type: 'ephemeral', text: STARTING_TEXT });
      return;
    }
    const started = Date.now();
    const answer = (async () => commands.run(invocationOf(payload, commands.definitions, await this.canManage(payload.user_id))))().then(
      (text) => ({ text, ok: true }),
      (err: unknown) => {
        this.o.log.error({ command: commandLabel(payload, commands.definitions), err: errorSummary(err) }, 'command failed');
        return { text: FAILED_TEXT, ok: false };
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ANSWER_IN_ACK_MS)));
    const inTime = await Promise.race([answer, late]);
    clearTimeout(timer);
    const command = commandLabel(payload, commands.definitions);
    if (inTime !== undefined) {
      await envelope.ack({ response_type: 'ephemeral', text: inTime.text });
      if (inTime.ok) this.o.log.info({ command, ms: Date.now() - started }, 'command answered');
      return;
    }
    await envelope.ack({ response_type: 'ephemeral', text: HOLDING_TEXT });
    const final = await answer;
    if (payload.response_url === undefined) {
      this.o.log.warn({ command }, 'slow command answer dropped: Slack gave no response_url');
      return;
    }
    const res = await fetch(payload.response_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ response_type: 'ephemeral', replace_original: true, text: final.text }),
    }).catch((err: unknown) => err as Error);
    if (res instanceof Error || !res.ok) this.o.log.warn({ command, status: res instanceof Error ? undefined : res.status }, 'slow command answer could not be posted to its response_url');
    else if (final.ok) this.o.log.info({ command, ms: Date.now() - started }, 'command answered late through response_url');
  }

  /** Whether Slack calls the user a workspace admin or owner: Herald's "manages the server". */
  private async canManage(userId: string | undefined): Promise<boolean> {
    if (this.call === undefined || userId === undefined) return false;
    try {
      const { user } = await this.call<UsersInfoResponse>('users.info', { user: userId });
      return user?.is_admin === true || user?.is_owner === true;
    } catch (err) {
      this.o.log.warn({ err: errorSummary(err) }, 'could not look up a command invoker on Slack; treated as not an admin');
      return false;
    }
  }
}

/**
 * Slack's client logging into Herald's log. Its debug lines carry whole payloads (message text,
 * pairing codes in command answers): they are never logged, whatever level is asked for.
 */
function slackLogger(log: Logger): SlackLogger {
  const line = (args: unknown[]): string => args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
  const child = log.child({ component: 'slack-socket-mode' });
  return {
    debug: () => undefined,
    info: (...args: unknown[]) => child.info(line(args)),
    warn: (...args: unknown[]) => child.warn(line(args)),
    error: (...args: unknown[]) => child.error(line(args)),
    setLevel: () => undefined,
    getLevel: () => LogLevel.INFO,
    setName: () => undefined,
  };
}
