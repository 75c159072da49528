import type { Server, ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { createBridgeClient, type Schema } from '../client/bridge-client.js';
import { errorSummary } from '../infra/errors.js';

/** How long to wait before asking again after Herald did not answer. */
const RETRY_MS = 5_000;

/** The logger name the notifications carry, so a client can tell them from other log messages. */
export const INBOX_LOGGER = 'herald.inbox';

/** Where Herald is, and who reads (a policy header naming an OAuth client; none: the connector). */
export interface InboxReader {
  baseUrl: string;
  token: string;
  headers?: Record<string, string>;
}

/** An inbox event as a notification names it: never its content. */
export interface InboxEventName {
  inbox_event: string;
  kind: string;
  platform: string;
  channel_id: string;
  author: string;
}

type InboxEvent = Schema<'InboxEvent'>;

const named = (event: InboxEvent): InboxEventName => ({ inbox_event: event.id, kind: event.kind, platform: event.platform, channel_id: event.channel_id, author: event.author.id });

/**
 * Waits on a reader's inbox through Herald's API (its long poll, so any replica of `herald mcp`
 * sees the same events) and calls `onEvent` once per new event, starting after the reader's
 * acknowledged cursor. Returns the stop (the pending wait is cut short, nothing is left running).
 * At least once: a notification is a wake-up, the agent reads with list_inbox or wait_for_messages
 * and acknowledges with ack_inbox; nothing here moves the cursor.
 */
export function watchInbox(herald: InboxReader, onEvent: (event: InboxEventName) => Promise<void> | void, log: Logger): () => void {
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
      await onEvent(named(event));
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

/**
 * For MCP clients that act on notifications (the 2025 revisions): while a session lasts (stdio, or
 * an HTTP+SSE stream), one `notifications/message` per new inbox event, naming it (id, kind,
 * platform, channel, author) but never its content. `herald.headers` name the reader: it is told
 * only of the events its own view of the inbox holds, after its own cursor.
 */
export function notifyInbox(server: Server, herald: InboxReader, log: Logger): () => void {
  return watchInbox(herald, (event) => server.sendLoggingMessage({ level: 'notice', logger: INBOX_LOGGER, data: { ...event, hint: 'read it with list_inbox or wait_for_messages' } }), log);
}

/** The inbox resource's URI prefix: `herald://inbox/<reader>`. */
export const INBOX_URI_PREFIX = 'herald://inbox/';

/**
 * A reader's inbox as a resource: `herald://inbox/connector` (stdio, the static token) or
 * `herald://inbox/client/<id>` (an OAuth client; its id one encoded path segment). Clients have a
 * namespace of their own: a client whose id is `connector` is not the connector.
 */
export const inboxUri = (client: string | undefined): string => `${INBOX_URI_PREFIX}${client === undefined ? 'connector' : `client/${encodeURIComponent(client)}`}`;

/** Where a notification's `_meta` names the event (never its content). */
export const INBOX_EVENT_META = 'dev.herald/inbox_event';

/**
 * The inbox as a 2026-07-28 subscription (`subscriptions/listen` on `herald://inbox/<reader>`), for
 * one `herald mcp --http` replica: a bus the SDK's listen streams subscribe to, fed per reader by
 * watchInbox while at least one stream of that reader is open here (`open` counts them; its
 * release stops the watch with the last one). Each event is one `notifications/resources/updated`
 * for that reader's URI, naming the event in `_meta`; the SDK delivers it only to streams that
 * asked for that URI, and the caller is checked before a stream opens (a caller listens to its own
 * inbox only).
 */
export class InboxFeed implements ServerEventBus {
  private readonly listeners = new Set<(event: ServerEvent) => void>();
  private readonly readers = new Map<string, { count: number; stop: () => void }>();

  constructor(private readonly log: Logger) {}

  publish(event: ServerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.log.warn({ err: errorSummary(err) }, 'inbox subscription listener failed');
      }
    }
  }

  subscribe(listener: (event: ServerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A stream for `uri` opened, read as `reader`: its inbox is watched until every such stream is released. */
  open(uri: string, reader: InboxReader): () => void {
    let entry = this.readers.get(uri);
    if (entry === undefined) {
      const stop = watchInbox(reader, (event) => this.publish({ kind: 'resource_updated', uri, params: { _meta: { [INBOX_EVENT_META]: { ...event } } } }), this.log);
      entry = { count: 0, stop };
      this.readers.set(uri, entry);
    }
    entry.count += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const e = this.readers.get(uri);
      if (e === undefined) return;
      e.count -= 1;
      if (e.count === 0) {
        e.stop();
        this.readers.delete(uri);
      }
    };
  }

  /** How many readers are watched (tests). */
  get watched(): number {
    return this.readers.size;
  }
}
