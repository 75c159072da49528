import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import type { TransportName } from '../../platforms/platform.js';
import type { ChatSendInput, ChatService } from './chat.service.js';

type Query = Record<string, unknown>;
const transportOf = (q: Query): TransportName | undefined => (q['transport'] === undefined ? undefined : (String(q['transport']) as TransportName));

/** The chat tools over the bridge: send (through the outbox), read, channels, members. */
export function chatOperations(chat: ChatService): OperationHandlers {
  return (kit) => ({
    sendChatMessage: async (_c, body) => {
      kit.checkBody('sendChatMessage', body);
      return reply('sendChatMessage', 202, await chat.send(body as ChatSendInput));
    },
    getChatMessage: async (c) => reply('getChatMessage', 200, await chat.get(String(c.request.params['id']))),
    readChatMessages: async (c) => {
      const q = c.request.query as Query;
      const limit = q['limit'] === undefined ? undefined : Number(q['limit']);
      return reply('readChatMessages', 200, await chat.read(String(q['channel']), transportOf(q), q['since'] === undefined ? undefined : String(q['since']), limit));
    },
    createChatChannel: async (_c, body) => {
      kit.checkBody('createChatChannel', body);
      const b = body as { name: string; transport?: TransportName };
      return reply('createChatChannel', 201, await chat.createChannel(b.name, b.transport));
    },
    listChatChannels: async (c) => reply('listChatChannels', 200, await chat.listChannels(transportOf(c.request.query as Query))),
    getChatMembers: async (c) => {
      const q = c.request.query as Query;
      return reply('getChatMembers', 200, await chat.members(String(q['channel']), transportOf(q)));
    },
  });
}
