import type { Intent } from '../platform/policy/policy.js';

type Input = { method: string; body: unknown; query: Readonly<Record<string, unknown>> };

const field = (value: unknown, key: string): string | undefined => {
  const v = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  return typeof v === 'string' ? v : undefined;
};

/** A delivery's tool, by its kind: the tool that sends that kind. */
const DELIVERY_TOOL: Readonly<Record<string, string>> = { post: 'post_message', dm: 'send_dm', edit: 'edit_message', reaction: 'react', delete: 'delete_message' };

/**
 * The MCP tool behind each bridge operation (by operationId) and what the call would do: the same
 * rules then hold for a tool and for the operation it calls. An operation not listed here (a
 * supporting read such as a delivery's detail) is held only by read_only.
 */
const OPERATIONS: Readonly<Record<string, (i: Input, chatPlatform: string) => Omit<Intent, 'writes'>>> = {
  getCapabilities: () => ({ tool: 'get_capabilities' }),
  createDelivery: ({ body }) => {
    const target = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['target'] : undefined;
    return { tool: DELIVERY_TOOL[field(body, 'kind') ?? ''], destination: field(target, 'destination') };
  },
  getDelivery: () => ({ tool: 'get_delivery', alsoFor: ['post_message', 'send_dm', 'edit_message', 'react', 'delete_message'] }),
  listRecipients: () => ({ tool: 'list_recipients' }),
  redeemPairingCode: () => ({ tool: 'pair' }),
  getRegistration: () => ({ tool: 'send_dm' }),
  listCommands: () => ({ tool: 'list_commands' }),
  describeCommand: () => ({ tool: 'describe_command' }),
  runCommand: ({ body }) => ({ tool: 'run_command', channel: field(body, 'channelId') }),
  sendHandoff: ({ body }) => ({ tool: 'hand_off', channel: field(body, 'channel_id') }),
  getHandoff: () => ({ tool: 'hand_off' }),
  listHandoffs: () => ({ tool: 'list_handoffs' }),
  waitForHandoff: () => ({ tool: 'wait_for_handoff' }),
  ackHandoffs: () => ({ tool: undefined }),
  sendChatMessage: ({ body }, chat) => ({ tool: 'send_message', channel: field(body, 'channel'), platform: field(body, 'transport') ?? chat }),
  getChatMessage: () => ({ tool: 'send_message' }),
  readChatMessages: ({ query }, chat) => ({ tool: 'read_messages', channel: field(query, 'channel'), platform: field(query, 'transport') ?? chat }),
  createChatChannel: ({ body }, chat) => ({ tool: 'create_channel', channel: field(body, 'name'), platform: field(body, 'transport') ?? chat }),
  listChatChannels: ({ query }, chat) => ({ tool: 'list_channels', platform: field(query, 'transport') ?? chat }),
  getChatMembers: ({ query }, chat) => ({ tool: 'get_members', channel: field(query, 'channel'), platform: field(query, 'transport') ?? chat }),
  startMediaScrape: ({ body }) => ({ tool: 'scrape_media', channel: field(body, 'channelId') }),
  listMediaScrapes: () => ({ tool: 'list_media_scrapes' }),
  getMediaScrape: () => ({ tool: 'get_media_scrape' }),
  stopMediaScrape: () => ({ tool: 'stop_media_scrape' }),
  deleteMediaScrape: () => ({ tool: 'delete_media_scrape' }),
  queryMedia: () => ({ tool: 'query_media' }),
  getMediaItem: () => ({ tool: 'get_media_item' }),
  getMediaStorage: () => ({ tool: 'get_media_storage' }),
  // An upload is part of a send (post_message or send_dm attach it): allowed where either is on, counted by neither.
  uploadFile: () => ({ tool: undefined, alsoFor: ['post_message', 'send_dm'] }),
  getFile: () => ({ tool: 'download_attachment', alsoFor: ['post_message', 'send_dm'] }),
  downloadAttachment: ({ body }) => ({ tool: 'download_attachment', channel: field(body, 'channel_id') }),
  listInbox: () => ({ tool: 'list_inbox', alsoFor: ['wait_for_messages'] }),
  waitForInbox: () => ({ tool: 'wait_for_messages', alsoFor: ['list_inbox'] }),
  ackInbox: () => ({ tool: 'ack_inbox' }),
};

/** What a bridge operation would do, for the rules: its tool, whether it writes (any method but GET/HEAD), where. */
export function operationIntent(operationId: string | undefined, input: Input, chatPlatform: string): Intent {
  const writes = input.method !== 'GET' && input.method !== 'HEAD';
  const describe = operationId === undefined ? undefined : OPERATIONS[operationId];
  return { writes, ...(describe?.(input, chatPlatform) ?? { tool: undefined }) };
}

/** The key a call is counted under against a rate cap: its request_id when it has one, so a retry of the same request is not counted twice. */
export function usageKey(body: unknown): string | undefined {
  return field(body, 'request_id') ?? field(body, 'idempotencyKey');
}
