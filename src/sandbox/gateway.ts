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
}

export interface GatewayOptions {
  botToken: string;
  botUser: Record<string, unknown>;
  applicationId: string;
  guilds: () => GatewayGuild[];
}

export class SandboxGateway {
  private readonly wss: WebSocketServer;
  private readonly sessions = new Set<{ socket: WebSocket; seq: number }>();

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

  /** Send a dispatch event to every identified session (like every session of one shard). */
  dispatch(type: string, data: unknown): void {
    for (const session of this.sessions) this.send(session, type, data);
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.sessions.clear();
    this.wss.close();
  }

  private accept(socket: WebSocket): void {
    const session = { socket, seq: 0 };
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
          const d = (typeof payload.d === 'object' && payload.d !== null ? payload.d : {}) as { token?: unknown };
          if (d.token !== this.options.botToken && d.token !== `Bot ${this.options.botToken}`) {
            socket.close(4004, 'Authentication failed.');
            return;
          }
          this.sessions.add(session);
          const guilds = this.options.guilds();
          this.send(session, 'READY', {
            v: 10,
            user: this.options.botUser,
            guilds: guilds.map((g) => ({ id: g.id, unavailable: true })),
            session_id: randomBytes(16).toString('hex'),
            resume_gateway_url: 'ws://unused',
            shard: [0, 1],
            application: { id: this.options.applicationId, flags: 0 },
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

  private send(session: { socket: WebSocket; seq: number }, type: string, data: unknown): void {
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
    threads: [],
    emojis: [],
    stickers: [],
    voice_states: [],
    presences: [],
    stage_instances: [],
    guild_scheduled_events: [],
    soundboard_sounds: [],
  };
}
