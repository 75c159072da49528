import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { BridgeClient, ChatSend, ChatTransport } from '../../client/bridge-client.js';
import { TRANSPORT_NAMES } from '../../transports/registry.js';
import { bridgeError, object, text, type JsonSchema, type McpTool } from '../../platform/mcp/tool.js';

/** What these tools need from `herald mcp`: the bridge, and how long a send waits for its outcome. */
export interface ChatToolDeps {
  bridge: BridgeClient;
  waitMs: number;
}

const transport: JsonSchema = {
  type: 'string',
  // Every platform Herald can speak (the registry); one not configured here is refused by the bridge.
  enum: [...TRANSPORT_NAMES],
  description: 'The chat platform; leave it out for the one Herald is configured with (HERALD_CHAT_TRANSPORT).',
};
const channel: JsonSchema = { type: 'string', minLength: 1, maxLength: 100, description: 'The channel: #name on IRC (the # may be left out), a channel name or id on Discord.' };
const transportOf = (args: Record<string, unknown>): { transport?: ChatTransport } => (args['transport'] === undefined ? {} : { transport: args['transport'] as ChatTransport });

/** `HH:MM:SS` of an ISO time, in UTC. */
const clock = (iso: string): string => iso.slice(11, 19);

/** The five chat tools of seed 003, the same on every platform. */
export function chatTools(): McpTool<ChatToolDeps>[] {
  return [
    {
      name: 'send_message',
      description:
        'Send text to a chat channel as `sender` (on IRC, your own nick: letters, digits, []\\`_^{|}-, not starting with a digit or -). Long text is split into lines and arrives in order. Sent exactly once: do not call again for the same text; if it answers pending, it is still going out.',
      inputSchema: object({ channel, text: { type: 'string', minLength: 1, maxLength: 8000 }, sender: { type: 'string', minLength: 1, maxLength: 32 }, transport }, ['channel', 'text', 'sender']),
      async handler(args, { bridge, waitMs }) {
        const r = await bridge.sendChatMessage({ channel: String(args['channel']), text: String(args['text']), sender: String(args['sender']), ...transportOf(args) });
        if (!r.ok) return bridgeError(r);
        let latest: ChatSend = r.data;
        const deadline = Date.now() + waitMs;
        while (latest.state === 'pending' && Date.now() < deadline) {
          await new Promise((res) => setTimeout(res, 100));
          const s = await bridge.getChatMessage(latest.id);
          if (s.ok) latest = s.data;
        }
        return describeSend(latest);
      },
    },
    {
      name: 'read_messages',
      description: 'Read a chat channel, newest first, as `[HH:MM:SS] <nick> text` lines (UTC). `since` (ISO 8601) keeps only later messages; `limit` 1..200, default 50.',
      inputSchema: object({ channel, since: { type: 'string', maxLength: 40, description: 'ISO 8601, e.g. 2026-11-30T09:00:00Z' }, limit: { type: 'integer', minimum: 1, maximum: 200 }, transport }, ['channel']),
      async handler(args, { bridge }) {
        const r = await bridge.readChatMessages({
          channel: String(args['channel']),
          ...transportOf(args),
          ...(args['since'] !== undefined ? { since: String(args['since']) } : {}),
          ...(args['limit'] !== undefined ? { limit: Number(args['limit']) } : {}),
        });
        if (!r.ok) return bridgeError(r);
        if (r.data.messages.length === 0) return text(`No messages in ${r.data.channel}.`);
        return text(r.data.messages.map((m) => `[${clock(m.at)}] <${m.nick}> ${m.text}`).join('\n'));
      },
    },
    {
      name: 'create_channel',
      description: 'Create a chat channel (on IRC Herald joins it and keeps reading it; on Discord the bot needs Manage Channels).',
      inputSchema: object({ name: { type: 'string', minLength: 1, maxLength: 100 }, transport }, ['name']),
      async handler(args, { bridge }) {
        const r = await bridge.createChatChannel({ name: String(args['name']), ...transportOf(args) });
        return r.ok ? text(`Channel ${r.data.channel} is ready on ${r.data.transport}.`) : bridgeError(r);
      },
    },
    {
      name: 'list_channels',
      description: 'The channels of the chat platform (IRC: the server\'s visible channels; Discord: the text channels of the server).',
      inputSchema: object({ transport }),
      async handler(args, { bridge }) {
        const r = await bridge.listChatChannels(transportOf(args));
        if (!r.ok) return bridgeError(r);
        return text(r.data.channels.length === 0 ? 'No channels.' : r.data.channels.map((c) => `- ${c}`).join('\n'));
      },
    },
    {
      name: 'get_members',
      description: 'Who is in a chat channel (Herald itself is not listed).',
      inputSchema: object({ channel, transport }, ['channel']),
      async handler(args, { bridge }) {
        const r = await bridge.getChatMembers({ channel: String(args['channel']), ...transportOf(args) });
        if (!r.ok) return bridgeError(r);
        return text(r.data.members.length === 0 ? `No one in ${r.data.channel}.` : r.data.members.map((m) => `- ${m}`).join('\n'));
      },
    },
  ];
}

function describeSend(s: ChatSend): CallToolResult {
  switch (s.state) {
    case 'delivered':
      return text(`Sent to ${s.channel} as ${s.sender}${(s.message_ids?.length ?? 0) > 1 ? ` in ${s.message_ids?.length} lines` : ''}; the server confirmed it.`);
    case 'unconfirmed':
      return text(`Written to ${s.channel} as ${s.sender}, but not confirmed: ${s.reason ?? 'the platform gives no proof'}. Do not send it again.`);
    case 'failed':
      return text(`Not sent: ${s.reason ?? 'refused'}.`, true);
    default:
      return text(`Still going out (id ${s.id}); do not send it again.`);
  }
}
