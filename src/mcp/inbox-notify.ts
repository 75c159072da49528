import type { Server } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { createBridgeClient } from '../client/bridge-client.js';
import { errorSummary } from '../infra/errors.js';

/** How long to wait before asking again after Herald did not answer. */
const RETRY_MS = 5_000;

/** The logger name the notifications carry, so a client can tell them from other log messages. */
export const INBOX_LOGGER = 'herald.inbox';

/**
 * For MCP clients that act on notifications: while a session lasts (stdio, or an HTTP+SSE stream),
 * wait on the agent's inbox and send one `notifications/message` per new event, naming it (id,
 * kind, platform, channel, author) but never its content: the agent reads that with list_inbox or
 * wait_for_messages and acknowledges with ack_inbox. Starts after the acknowledged cursor; returns
 * the stop. `headers` name the reader (an OAuth client's policy header): it is told only of the
 * events its own view of the inbox holds, after its own cursor.
 */
export function notifyInbox(server: Server, herald: { baseUrl: string; token: string; headers?: Record<string, string> }, log: Logger): () => void {
  let stopped = false;
  // Its own client, whose long wait the stop cuts short (nothing is left pending when the session ends).
  const abort = new AbortController();
  const bridge = createBridgeClient({ ...herald, fetch: (input, init) => fetch(input, { ...init, signal: abort.signal }) });
  let after: string | undefined;
  let wake: (() => void) | undefined;
  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const loop = async (): Promise<void> => {
    while (!stopped) {
      const r = await bridge.call('waitForInbox', { query: after === undefined ? { timeout_ms: '30000' } : { after, timeout_ms: '30000' } }).catch(() => undefined);
      if (stopped) return;
      if (r === undefined) continue;
      if (!r.ok) {
        await pause(RETRY_MS);
        continue;
      }
      const event = r.data.event;
      if (event === null) continue;
      after = event.id;
      await server.sendLoggingMessage({
        level: 'notice',
        logger: INBOX_LOGGER,
        data: { inbox_event: event.id, kind: event.kind, platform: event.platform, channel_id: event.channel_id, author: event.author.id, hint: 'read it with list_inbox or wait_for_messages' },
      });
    }
  };
  loop().catch((err: unknown) => {
    if (!stopped) log.warn({ err: errorSummary(err) }, 'inbox notifications stopped');
  });
  return () => {
    stopped = true;
    abort.abort();
    wake?.();
  };
}
