import { SANDBOX_MEDIA_CHANNEL, SANDBOX_MEMBER_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';
import { IDS } from './herald.js';
import type { ToolResult } from './mcp.js';

/** What the calls learn and later rows use (and the request_id the scenario's writes share). */
export interface Seen {
  code: string;
  scrapeId: string;
  requestId: string;
}

/** A call of one tool, where the scenario needs particular arguments. */
export interface Row {
  args: (seen: Seen) => Record<string, unknown>;
  /** The call must succeed (else an error result is allowed: e.g. no trusted bot is configured). */
  ok: boolean;
  after?: (r: ToolResult & { structuredContent?: Record<string, unknown> }, seen: Seen) => void;
}

/**
 * The calls a scenario makes, in this order, where a tool needs arguments of its own (a pairing
 * code, a scrape made before). The tools themselves come from the modules' declarations or the
 * server's list: a tool without a row here is called last, with arguments built from its input
 * schema (everyCall). Nothing to add for a new tool. Used by test/mcp-tools.test.ts and
 * test/mcp-clients.test.ts.
 */
export const CALLS: Readonly<Record<string, Row>> = {
  get_capabilities: { args: () => ({ guild_id: IDS.guild }), ok: true },
  post_message: { args: (s) => ({ guild_id: IDS.guild, destination: 'alerts', content: 'every tool: a post', request_id: s.requestId }), ok: true },
  edit_message: { args: (s) => ({ request_id: s.requestId, content: 'every tool: edited' }), ok: true },
  get_delivery: { args: (s) => ({ request_id: s.requestId }), ok: true },
  pair: { args: (s) => ({ code: s.code }), ok: true },
  send_dm: { args: () => ({ content: 'every tool: a DM' }), ok: true },
  list_recipients: { args: () => ({}), ok: true },
  list_commands: { args: () => ({}), ok: true },
  describe_command: { args: () => ({ name: 'dest' }), ok: true },
  run_command: {
    args: () => ({ command: `destinations set alerts <#${IDS.channels.ops}>`, guildId: IDS.guild, channelId: IDS.channels.alerts, userId: SANDBOX_MEMBER_IDS.manager }),
    ok: true,
  },
  hand_off: { args: () => ({ target_bot_id: '222222222222222222', channel_id: IDS.channels.alerts, text: 'a task' }), ok: false },
  list_handoffs: { args: () => ({}), ok: true },
  wait_for_handoff: { args: () => ({ timeout_seconds: 0 }), ok: true },
  scrape_media: {
    args: () => ({ channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' }),
    ok: true,
    after: (r, seen) => {
      seen.scrapeId = String(r.structuredContent?.['id']);
    },
  },
  list_media_scrapes: { args: () => ({}), ok: true },
  get_media_scrape: { args: (s) => ({ scrapeId: s.scrapeId }), ok: true },
  stop_media_scrape: { args: (s) => ({ scrapeId: s.scrapeId }), ok: false },
  query_media: { args: () => ({ limit: 5 }), ok: true },
  get_media_item: { args: () => ({ itemId: '1' }), ok: false },
  get_media_storage: { args: () => ({}), ok: true },
  delete_media_scrape: { args: (s) => ({ scrapeId: s.scrapeId }), ok: true },
  send_message: { args: () => ({ channel: 'alerts', text: 'every tool: chat', sender: 'herald-test' }), ok: false },
  read_messages: { args: () => ({ channel: 'alerts', limit: 5 }), ok: false },
  create_channel: { args: () => ({ name: 'every-tool' }), ok: false },
  list_channels: { args: () => ({}), ok: false },
  get_members: { args: () => ({ channel: 'alerts' }), ok: false },
  download_attachment: { args: () => ({ channel_id: IDS.channels.alerts, message_id: '1', attachment_id: '1' }), ok: false },
  wait_for_messages: { args: () => ({ timeout_seconds: 0 }), ok: true },
  list_inbox: { args: () => ({}), ok: true },
  ack_inbox: { args: () => ({ cursor: '0' }), ok: false },
  react: { args: (s) => ({ message_ref: s.requestId, emoji: '👍' }), ok: true },
  delete_message: { args: (s) => ({ message_ref: s.requestId }), ok: true },
};

/** Arguments from an input schema: each required property's example, first value, or a minimal value of its type. */
export function argsFrom(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = (schema['properties'] ?? {}) as Record<string, Record<string, unknown>>;
  const value = (p: Record<string, unknown>): unknown =>
    (p['examples'] as unknown[] | undefined)?.[0] ?? p['example'] ?? (p['enum'] as unknown[] | undefined)?.[0] ?? p['const'] ??
    ({ string: 'x', integer: p['minimum'] ?? 0, number: p['minimum'] ?? 0, boolean: false, array: [], object: {} } as Record<string, unknown>)[String(p['type'])];
  return Object.fromEntries(((schema['required'] ?? []) as string[]).map((name) => [name, value(properties[name] ?? {})]));
}

/** A call for every tool given (a name and its input schema): the scenario's rows first, in their order, then the rest. */
export function everyCall(tools: readonly { name: string; inputSchema: Record<string, unknown> }[]): Readonly<Record<string, Row>> {
  const names = new Set(tools.map((t) => t.name));
  return {
    ...Object.fromEntries(Object.entries(CALLS).filter(([name]) => names.has(name))),
    ...Object.fromEntries(tools.filter((t) => CALLS[t.name] === undefined).map((t) => [t.name, { args: () => argsFrom(t.inputSchema), ok: false }])),
  };
}

/** What the replay samples need: the person's message asking for the command, this agent's two posts they act on, and the keys to use. */
export interface ReplaySeen {
  source: string;
  /** A post of this agent's own, edited and reacted to. */
  post: string;
  /** Another, deleted. */
  toDelete: string;
  /** The channel scrape_media scrapes (one scrape per channel: another run, another channel). */
  scrapeChannel: string;
  /** The n-th key of this run (64 lowercase hex): another run, another set. */
  key: (n: number) => string;
}

/**
 * A call of every tool that has a replay key (its key among the arguments), for calling twice:
 * test/mcp-replay.test.ts (the second answers that it replayed) and test/mcp-replicas.test.ts (the
 * first's stream cut). A tool given a key and no sample fails mcp-replay's walk: add its sample here.
 * They need Herald started with a trusted bot, command execution and the chat guild (as those tests do).
 */
export const REPLAY_SAMPLES: Readonly<Record<string, (s: ReplaySeen) => Record<string, unknown>>> = {
  post_message: (s) => ({ guild_id: IDS.guild, destination: 'alerts', content: `replay: a post ${s.key(1).slice(0, 4)}`, request_id: s.key(1) }),
  send_dm: (s) => ({ content: `replay: a DM ${s.key(2).slice(0, 4)}`, request_id: s.key(2) }),
  edit_message: (s) => ({ request_id: s.post, content: 'replay: edited', edit_id: s.key(3) }),
  react: (s) => ({ message_ref: s.post, emoji: '👍', request_id: s.key(4) }),
  delete_message: (s) => ({ message_ref: s.toDelete, request_id: s.key(5) }),
  hand_off: (s) => ({ target_bot_id: SANDBOX_MEMBER_IDS.otherBot, channel_id: IDS.channels.alerts, text: `replay: a task ${s.key(6).slice(0, 4)}`, request_id: s.key(6) }),
  send_message: (s) => ({ channel: '#alerts', text: `replay: a chat line ${s.key(7).slice(0, 4)}`, sender: 'ada', request_id: s.key(7) }),
  scrape_media: (s) => ({ channelId: s.scrapeChannel, mode: 'links', request_id: s.key(9) }),
  run_command: (s) => ({ command: `destinations set digest <#${IDS.channels.ops}>`, guildId: IDS.guild, channelId: IDS.channels.alerts, userId: SANDBOX_MEMBER_IDS.manager, mode: 'execute', sourceMessageId: s.source, idempotencyKey: `replay-${s.key(8)}`.slice(0, 40) }),
};
