import type { TransportName } from '../../transports/transport.js';
import { defineModule } from '../contract.js';
import type { ChatService } from './chat.service.js';
import { chatTools } from './chat.tools.js';

/** The chat tools (send, read, channels, members) on any platform with a chat facet. */
export const chatModule = defineModule<{ chat: ChatService }>({
  name: 'chat',
  migrations: ['2026-11-30T09-00-00_irc'],
  tools: chatTools,
  async start({ config, db, clock, log, transports, doorbell }) {
    const [{ ChatService }, { ChatJobs, chatQueue }, { chatOperations }] = await Promise.all([import('./chat.service.js'), import('./chat.jobs.js'), import('./chat.http.js')]);
    // HERALD_CHAT_TRANSPORT names a platform of the registry (config.ts checked it).
    const chat = new ChatService(db, transports, config.chatTransport as TransportName, clock, { announce: () => doorbell.ring() });
    const jobs = new ChatJobs(db, transports, clock, log, { maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
    return {
      gives: { chat },
      operations: [chatOperations(chat)],
      jobs: [{ queue: chatQueue(db), kinds: jobs.kinds(), prune: true }],
    };
  },
});
