import type { TransportName } from '../../platforms/platform.js';
import { defineModule } from '../contract.js';
import { deliveriesModule } from '../deliveries/index.js';
import type { ChatService } from './chat.service.js';
import { chatTools } from './chat.tools.js';

/**
 * The chat tools (send, read, channels, members) on any platform with a chat facet. A send is a
 * row of the deliveries outbox, kind `chat`, which this module declares (chat.kind.ts).
 */
export const chatModule = defineModule<{ chat: ChatService }>({
  name: 'chat',
  needs: { modules: [deliveriesModule] },
  tools: chatTools,
  async start({ config, clock, transports, use }) {
    const [{ ChatService }, { chatSendKind }, { chatOperations }] = await Promise.all([import('./chat.service.js'), import('./chat.kind.js'), import('./chat.http.js')]);
    const { deliveries, declare } = use(deliveriesModule);
    declare(chatSendKind(transports));
    // HERALD_CHAT_TRANSPORT names a platform of the registry (config.ts checked it).
    const chat = new ChatService(deliveries, transports, config.chatTransport as TransportName, clock);
    return {
      gives: { chat },
      operations: [chatOperations(chat)],
    };
  },
});
