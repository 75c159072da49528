import type { CallToolResult } from '@modelcontextprotocol/server';
import type { BridgeClient, Schema } from '../../client/bridge-client.js';
import { PLATFORM_NAMES } from '../../platforms/platforms.js';
import { bridgeError, contractSchema, hints, object, replayMarked, result, type JsonSchema, type McpTool } from '../../infra/mcp/tool.js';

/** What these tools need from `herald mcp`: the bridge, and how long a send waits for its outcome. */
export interface ChatToolDeps {
  bridge: BridgeClient;
  waitMs: number;
}

const transport: JsonSchema = {
  type: 'string',
  // Every platform Herald can speak (the registry); one not configured here is refused by the bridge.
  enum: [...PLATFORM_NAMES],
  description: 'The chat platform; leave it out for the one Herald is configured with (HERALD_CHAT_TRANSPORT).',
};
const channel: JsonSchema = { type: 'string', minLength: 1, maxLength: 100, description: 'The channel: #name on IRC (the # may be left out), a channel name or id on Discord.' };
const transportOf = (args: Record<string, unknown>): { transport?: Schema<'ChatTransport'> } => (args['transport'] === undefined ? {} : { transport: args['transport'] as Schema<'ChatTransport'> });

/** `HH:MM:SS` of an ISO time, in UTC. */
const clock = (iso: string): string => iso.slice(11, 19);

/** The five chat tools, the same on every platform. */
export function chatTools(): McpTool<ChatToolDeps>[] {
  return [
    {
      name: 'send_message',
      operations: ['sendChatMessage', 'getChatMessage'],
      title: 'Send to a chat channel',
      annotations: hints(false, false, false, true),
      output: 'ChatSend',
      replay: { key: 'request_id' },
      description:
        'Send text to a chat channel as `sender` (on IRC, your own nick: letters, digits, []\\`_^{|}-, not starting with a digit or -). Long text is split into lines and arrives in order. Sent exactly once per request_id: without one, each call is a new message (not idempotent); give the same request_id to retry safely (a repeat answers that it replayed, sending nothing new). If it answers pending, it is still going out.',
      inputSchema: object(
        {
          channel,
          text: { type: 'string', minLength: 1, maxLength: 8000 },
          sender: { type: 'string', minLength: 1, maxLength: 32 },
          transport,
          request_id: contractSchema('ChatSendId', 'Optional: 32 to 64 lowercase hex characters naming this send; the same one again never sends twice. Default: a fresh one.'),
        },
        ['channel', 'text', 'sender'],
      ),
      async handler(args, { bridge, waitMs }) {
        const requestId = typeof args['request_id'] === 'string' ? { request_id: args['request_id'] } : {};
        const r = await bridge.call('sendChatMessage', { body: { channel: String(args['channel']), text: String(args['text']), sender: String(args['sender']), ...transportOf(args), ...requestId } });
        if (!r.ok) return bridgeError(r);
        let latest: Schema<'ChatSend'> = r.data;
        const deadline = Date.now() + waitMs;
        while (latest.state === 'pending' && Date.now() < deadline) {
          await new Promise((res) => setTimeout(res, 100));
          const s = await bridge.call('getChatMessage', { path: { id: latest.id } });
          if (s.ok) latest = s.data;
        }
        return replayMarked(describeSend(latest), r.data.existing === true, 'request_id', r.data.id);
      },
    },
    {
      name: 'read_messages',
      operations: ['readChatMessages'],
      title: 'Read a chat channel',
      annotations: hints(true, false, true, true),
      output: 'ChatMessages',
      description: 'Read a chat channel, newest first, as `[HH:MM:SS] <nick> text` lines (UTC). `since` (ISO 8601) keeps only later messages; `limit` 1..200, default 50.',
      inputSchema: object({ channel, since: { type: 'string', maxLength: 40, description: 'ISO 8601, e.g. 2026-11-30T09:00:00Z' }, limit: { type: 'integer', minimum: 1, maximum: 200 }, transport }, ['channel']),
      async handler(args, { bridge }) {
        const r = await bridge.call('readChatMessages', { query: {
          channel: String(args['channel']),
          ...transportOf(args),
          ...(args['since'] !== undefined ? { since: String(args['since']) } : {}),
          ...(args['limit'] !== undefined ? { limit: Number(args['limit']) } : {}),
        } });
        if (!r.ok) return bridgeError(r);
        if (r.data.messages.length === 0) return result(`No messages in ${r.data.channel}.`, r.data);
        return result(r.data.messages.map((m) => `[${clock(m.at)}] <${m.nick}> ${m.text}`).join('\n'), r.data);
      },
    },
    {
      name: 'create_channel',
      operations: ['createChatChannel'],
      title: 'Create a chat channel',
      annotations: hints(false, false, false, true),
      output: 'ChatChannel',
      replay: { natural: 'a channel is known by its name: creating one that exists answers it and creates nothing' },
      description: 'Create a chat channel (on IRC Herald joins it and keeps reading it; on Discord the bot needs Manage Channels).',
      inputSchema: object({ name: { type: 'string', minLength: 1, maxLength: 100 }, transport }, ['name']),
      async handler(args, { bridge }) {
        const r = await bridge.call('createChatChannel', { body: { name: String(args['name']), ...transportOf(args) } });
        return r.ok ? result(`Channel ${r.data.channel} is ready on ${r.data.transport}.`, r.data) : bridgeError(r);
      },
    },
    {
      name: 'list_channels',
      operations: ['listChatChannels'],
      title: 'The chat channels',
      annotations: hints(true, false, true, true),
      output: 'ChatChannels',
      description: 'The channels of the chat platform (IRC: the server\'s visible channels; Discord: the text channels of the server).',
      inputSchema: object({ transport }),
      async handler(args, { bridge }) {
        const r = await bridge.call('listChatChannels', { query: transportOf(args) });
        if (!r.ok) return bridgeError(r);
        return result(r.data.channels.length === 0 ? 'No channels.' : r.data.channels.map((c) => `- ${c}`).join('\n'), r.data);
      },
    },
    {
      name: 'get_members',
      operations: ['getChatMembers'],
      title: 'Who is in a chat channel',
      annotations: hints(true, false, true, true),
      output: 'ChatMembers',
      description: 'Who is in a chat channel (Herald itself is not listed).',
      inputSchema: object({ channel, transport }, ['channel']),
      async handler(args, { bridge }) {
        const r = await bridge.call('getChatMembers', { query: { channel: String(args['channel']), ...transportOf(args) } });
        if (!r.ok) return bridgeError(r);
        return result(r.data.members.length === 0 ? `No one in ${r.data.channel}.` : r.data.members.map((m) => `- ${m}`).join('\n'), r.data);
      },
    },
  ];
}

function describeSend(s: Schema<'ChatSend'>): CallToolResult {
  switch (s.state) {
    case 'delivered':
      return result(`Sent to ${s.channel} as ${s.sender}${(s.message_ids?.length ?? 0) > 1 ? ` in ${s.message_ids?.length} lines` : ''}; the server confirmed it.`, s);
    case 'unconfirmed':
      return result(`Written to ${s.channel} as ${s.sender}, but not confirmed: ${s.reason ?? 'the platform gives no proof'}. Do not send it again.`, s);
    case 'failed':
      return { ...result(`Not sent: ${s.reason ?? 'refused'}.`, s), isError: true };
    default:
      return result(`Still going out (id ${s.id}); do not send it again.`, s);
  }
}
