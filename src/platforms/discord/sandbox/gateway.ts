import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

/**
 * The slice of Discord's gateway Herald's discord.js client uses: HELLO, IDENTIFY → READY,
 * heartbeats, GUILD_CREATE, and INTERACTION_CREATE for slash commands.
 * https://discord.com/developers/docs/events/gateway
 */

const Op = { Dispatch: 0, Heartbeat: 1, Identify: 2, Resume: 6, Hello: 10, HeartbeatAck: 11 } as const;

export interface GatewayGuild {
  id: string;
  name: string;
  channels: { id: string; name?: string; type: number }[];
  threads?: { id: string; name?: string; type: number; parent_id?: string }[];
}

export interface GatewayOptions {
  /** The bot a token belongs to (Herald's, or another bot the sandbox hosts), as Discord shows it. */
  botFor: (token: string) => { id: string; user: Record<string, unknown> } | undefined;
  /** Herald's own bot (the application whose interactions the sandbox sends). */
  primaryBotId: string;
  /** The bot a DM channel is with (undefined: not a DM channel). */
  dmBotOf: (channelId: string) => string | undefined;
  guilds: () => GatewayGuild[];
}

interface Session {
  socket: WebSocket;
  seq: number;
  botId: string;
  /** The intents the session identified with (a bit-set). */
  intents: number;
}

/** GatewayIntentBits.MessageContent: the session sees every message's content (the sandbox grants it when asked). */
const MESSAGE_CONTENT = 1 << 15;

export class SandboxGateway {
  private readonly wss: WebSocketServer;
  private readonly sessions = new Set<Session>();

  constructor(
    server: Server,
    private readonly options: GatewayOptions,
  ) {
    this.wss = new WebSocketServer({ server, path: '/gateway' });
    this.wss.on('connection', (socket) => this.accept(socket));
  }

  get connected(): number {
    return this.sessions.size;
  }

  /** Send a dispatch event to every identified session of Herald's own bot (like every session of one shard). */
  dispatch(type: string, data: unknown): void {
    for (const session of this.sessions) if (session.botId === this.options.primaryBotId) this.send(session, type, data);
  }

  /** A dispatch event to every identified session of one bot (an interaction with its application's command). */
  dispatchTo(botId: string, type: string, data: unknown): void {
    for (const session of this.sessions) if (session.botId === botId) this.send(session, type, data);
  }

  /** How many sessions one bot has open. */
  sessionsOf(botId: string): number {
    return [...this.sessions].filter((s) => s.botId === botId).length;
  }

  /** A guild-wide event (a thread created) to every connected bot. */
  dispatchAll(type: string, data: unknown): void {
    for (const session of this.sessions) this.send(session, type, data);
  }

  /**
   * MESSAGE_CREATE to every connected bot, as Discord does: without the Message Content intent, the
   * content (and embeds, components) only to its author, to the bots it mentions, and in DMs
   * (https://discord.com/developers/docs/events/gateway#message-content-intent).
   */
  dispatchMessage(data: { author: { id: string }; mentions: { id: string }[] } & Record<string, unknown>): void {
    for (const session of this.sessions) {
      // A DM (no guild) reaches the bot the DM channel is with (and its author).
      if (data['guild_id'] === undefined && session.botId !== this.options.dmBotOf(String(data['channel_id'])) && data.author.id !== session.botId) continue;
      const sees =
        data.author.id === session.botId || data.mentions.some((u) => u.id === session.botId) || data['guild_id'] === undefined || (session.intents & MESSAGE_CONTENT) !== 0;
      this.send(session, 'MESSAGE_CREATE', sees ? data : { ...data, content: '', embeds: [], components: [] });
    }
  }

  /** Close every session of one bot with this close code (4004: its token is no longer valid). */
  closeSessionsOf(botId: string, code: number, reason: string): void {
    for (const session of this.sessions) {
      if (session.botId !== botId) continue;
      this.sessions.delete(session);
      session.socket.close(code, reason);
    }
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.sessions.clear();
    this.wss.close();
  }

  private accept(socket: WebSocket): void {
    const session: Session = { socket, seq: 0, botId: '', intents: 0 };
    socket.send(JSON.stringify({ op: Op.Hello, d: { heartbeat_interval: 41_250 }, s: null, t: null }));
    socket.on('message', (raw) => {
      let payload: { op?: number; d?: unknown };
      try {
        payload = JSON.parse(String(raw)) as typeof payload;
      } catch {
        socket.close(4002, 'Error while decoding payload.');
        return;
      }
      // Whatever a client sends, the gateway answers it or closes it: never a thrown error.
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
        socket.close(4002, 'Error while decoding payload.');
        return;
      }
      switch (payload.op) {
        case Op.Heartbeat:
          socket.send(JSON.stringify({ op: Op.HeartbeatAck, d: null, s: null, t: null }));
          return;
        case Op.Identify: {
          const d = (typeof payload.d === 'object' && payload.d !== null ? payload.d : {}) as { token?: unknown; intents?: unknown };
          session.intents = typeof d.intents === 'number' ? d.intents : 0;
          const token = typeof d.token === 'string' ? d.token.replace(/^Bot /, '') : '';
          const bot = this.options.botFor(token);
          if (bot === undefined) {
            socket.close(4004, 'Authentication failed.');
            return;
          }
          session.botId = bot.id;
          this.sessions.add(session);
          const guilds = this.options.guilds();
          this.send(session, 'READY', {
            v: 10,
            user: bot.user,
            guilds: guilds.map((g) => ({ id: g.id, unavailable: true })),
            session_id: randomBytes(16).toString('hex'),
            resume_gateway_url: 'ws://unused',
            shard: [0, 1],
            // As on Discord, a bot's application id is its user id.
            application: { id: bot.id, flags: 0 },
          });
          for (const g of guilds) this.send(session, 'GUILD_CREATE', guildCreate(g));
          return;
        }
        case Op.Resume:
          // Sessions are not kept: ask for a fresh IDENTIFY.
          socket.send(JSON.stringify({ op: 9, d: false, s: null, t: null }));
          return;
        default:
          return;
      }
    });
    socket.on('close', () => this.sessions.delete(session));
  }

  private send(session: Session, type: string, data: unknown): void {
    session.seq += 1;
    session.socket.send(JSON.stringify({ op: Op.Dispatch, t: type, s: session.seq, d: data }));
  }
}

function guildCreate(g: GatewayGuild): Record<string, unknown> {
  return {
    id: g.id,
    name: g.name,
    unavailable: false,
    owner_id: '1',
    icon: null,
    features: [],
    member_count: 1,
    large: false,
    joined_at: new Date(0).toISOString(),
    roles: [{ id: g.id, name: '@everyone', permissions: '0', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 }],
    channels: g.channels.map((c, position) => ({ id: c.id, name: c.name ?? 'channel', type: c.type, position, guild_id: g.id, permission_overwrites: [] })),
    members: [],
    threads: (g.threads ?? []).map((t) => threadChannel(g.id, t)),
    emojis: [],
    stickers: [],
    voice_states: [],
    presences: [],
    stage_instances: [],
    guild_scheduled_events: [],
    soundboard_sounds: [],
  };
}

/** A public thread as the gateway shows it (GUILD_CREATE's threads, THREAD_CREATE). */
export function threadChannel(guildId: string, t: { id: string; name?: string; type: number; parent_id?: string }): Record<string, unknown> {
  return {
    id: t.id,
    name: t.name ?? 'thread',
    type: t.type,
    guild_id: guildId,
    parent_id: t.parent_id ?? null,
    owner_id: '1',
    message_count: 0,
    member_count: 0,
    thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: new Date(0).toISOString(), locked: false },
  };
}
