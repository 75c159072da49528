import { readFile, rename } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { BridgeClient, Schema } from '../client/bridge-client.js';

/** A post or DM this sender sent, with the last edit seq it took. */
export interface SentMessage {
  kind: 'post' | 'dm';
  seq: number;
  sent_at: string;
}

/**
 * What one sender of `herald mcp` knows of what it did: its messages and their edit seqs, the
 * request_ids it claimed. stdio and the static HERALD_MCP_TOKEN are the connector's; each OAuth
 * client of `herald mcp --http` has its own: one client's message is, to another, one it never sent.
 * Kept in Herald's store (`/mcp/records/`, openapi/records.yaml), per caller, so any replica of
 * `herald mcp`, on any host, answers any call of an agent (issue 39).
 */
export interface AgentRecords {
  /** The message this sender sent under `requestId` in the last 8 days, if it did. */
  message(requestId: string): Promise<SentMessage | undefined>;
  rememberMessage(requestId: string, kind: 'post' | 'dm'): Promise<void>;
  /**
   * The next edit seq for a message, stored before it is used (no two replicas get the same one).
   * With the edit's own id (edit_id): the seq that edit was given before, if it was, so a retried
   * edit is the very same request.
   */
  nextSeq(requestId: string, editId?: string): Promise<number>;
  /** Whether this sender may see or act on what was sent under `requestId` (the connector: all the bridge token may). */
  owns(requestId: string): Promise<boolean>;
  /**
   * Noted before the bridge sees `requestId`, so a retry after a lost answer is known as this
   * sender's own. Answers whether a delivery Herald already holds under that id is this sender's to
   * be answered as a replay: the connector's, always; a client's, only when it claimed it before.
   */
  claim(requestId: string): Promise<boolean>;
  /** Forgets a claim the bridge refused outright (nothing of this sender's is stored under it). */
  release(requestId: string): Promise<void>;
}

/** A records call Herald did not answer: the tool fails (nothing was sent yet, or the send stands: get_delivery says). */
function failed(what: string, r: { status: number; error: string }): Error {
  return new Error(`Herald did not keep this agent's records (${what}): ${r.error}${r.status === 0 ? '' : ` (HTTP ${r.status})`}`);
}

/**
 * The records of the caller `bridge` speaks for (the connector; or an OAuth client, whose id the
 * bridge client sends in x-herald-policy-client), in Herald's store. `connector`: it holds the bridge
 * token, so what it may see through Herald's API it may see here, and every delivery under an id it
 * gave is its own (its claims are not kept).
 */
export function storeRecords(bridge: BridgeClient, who: 'connector' | 'client'): AgentRecords {
  const path = (requestId: string): { path: { request_id: string } } => ({ path: { request_id: requestId } });
  return {
    async message(requestId) {
      const r = await bridge.call('getAgentMessage', path(requestId));
      if (r.ok) return { kind: r.data.kind, seq: r.data.seq, sent_at: r.data.sent_at };
      // 404: not this sender's; 400: no request_id at all (never sent by anyone).
      if (r.status === 404 || r.status === 400) return undefined;
      throw failed('read a message', r);
    },
    async rememberMessage(requestId, kind) {
      const r = await bridge.call('rememberAgentMessage', { ...path(requestId), body: { kind } });
      if (!r.ok) throw failed('note a message', r);
    },
    async nextSeq(requestId, editId) {
      const r = await bridge.call('nextAgentEditSeq', { ...path(requestId), body: editId === undefined ? {} : { edit_id: editId } });
      if (r.ok) return r.data.seq;
      throw r.status === 404 ? new Error('unknown message') : failed('take an edit seq', r);
    },
    async owns(requestId) {
      if (who === 'connector') return true;
      const r = await bridge.call('getAgentOwnership', path(requestId));
      if (r.ok) return r.data.owned;
      if (r.status === 400) return false;
      throw failed('read a claim', r);
    },
    async claim(requestId) {
      if (who === 'connector') return true;
      const r = await bridge.call('claimAgentRequest', path(requestId));
      if (r.ok) return r.data.claimed_before;
      throw failed('claim a request_id', r);
    },
    async release(requestId) {
      if (who === 'connector') return;
      const r = await bridge.call('releaseAgentRequest', path(requestId));
      if (!r.ok) throw failed('release a request_id', r);
    },
  };
}

/** One sender's part of a file an older `herald mcp` wrote. */
interface FileRecords {
  messages?: Record<string, SentMessage & { edits?: Record<string, number> }>;
  sent?: Record<string, string>;
}

/** The file an older `herald mcp` kept its records in (HERALD_MCP_STATE): the connector's at the top, each OAuth client's under `clients`. */
interface RecordsFile extends FileRecords {
  clients?: Record<string, FileRecords>;
}

/**
 * The most bytes one import call's body carries: a file's records go in parts, each well under
 * Herald's body limit (64 KiB; a part by count, 500 records, was twice that and answered 413).
 */
const IMPORT_BODY_BYTES = 48 * 1024;
/** Edit ids kept per message, its latest: an older edit id sent again later takes a new seq. */
const IMPORT_EDITS = 200;

type ImportPart = { messages: Record<string, unknown>; sent: Record<string, string> };

/** A sender's records in parts of at most IMPORT_BODY_BYTES each. */
function importParts(records: FileRecords): ImportPart[] {
  const parts: ImportPart[] = [];
  let part: ImportPart = { messages: {}, sent: {} };
  let bytes = 32;
  const add = (into: 'messages' | 'sent', id: string, value: unknown): void => {
    const size = JSON.stringify(id).length + JSON.stringify(value).length + 2;
    if (bytes + size > IMPORT_BODY_BYTES && Object.keys(part.messages).length + Object.keys(part.sent).length > 0) {
      parts.push(part);
      part = { messages: {}, sent: {} };
      bytes = 32;
    }
    (part[into] as Record<string, unknown>)[id] = value;
    bytes += size;
  };
  for (const [id, m] of Object.entries(records.messages ?? {})) {
    const edits = m.edits === undefined ? undefined : Object.fromEntries(Object.entries(m.edits).sort(([, a], [, b]) => b - a).slice(0, IMPORT_EDITS));
    // The message keeps the largest seq it ever took, edits dropped above or not.
    const seq = Math.max(m.seq, ...Object.values(m.edits ?? {}));
    add('messages', id, { kind: m.kind, seq, sent_at: m.sent_at, ...(edits === undefined ? {} : { edits }) });
  }
  for (const [id, at] of Object.entries(records.sent ?? {})) add('sent', id, at);
  if (Object.keys(part.messages).length + Object.keys(part.sent).length > 0) parts.push(part);
  return parts;
}

/**
 * Imports, once, the records an older `herald mcp` kept in its own file (HERALD_MCP_STATE) into
 * Herald's store, each sender's as its own (`bridgeFor(client)`), so an upgrade loses no edit seq;
 * then renames the file `<file>.imported`, so it is not read again. The import is idempotent (a
 * message keeps the larger seq): a crash half way, or two replicas importing copies of one file, are
 * harmless. When Herald refuses or cannot be reached, the file stays, and the next start tries again.
 */
export async function importRecordsFile(file: string, bridgeFor: (client: string | undefined) => BridgeClient, log: Logger): Promise<void> {
  let data: RecordsFile;
  try {
    data = JSON.parse(await readFile(file, 'utf8')) as RecordsFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    log.warn({ file, err: (err as Error).message }, 'cannot read the records file of an older herald mcp; it is left as it is');
    return;
  }
  const senders: [string | undefined, FileRecords][] = [[undefined, data], ...Object.entries(data.clients ?? {})];
  let messages = 0;
  for (const [client, records] of senders) {
    const bridge = bridgeFor(client);
    for (const part of importParts(records)) {
      const body: Schema<'AgentRecordsImport'> = { messages: part.messages as Schema<'AgentRecordsImport'>['messages'], ...(Object.keys(part.sent).length > 0 ? { sent: part.sent } : {}) };
      const r = await bridge.call('importAgentRecords', { body });
      if (!r.ok) {
        log.warn({ file, status: r.status, error: r.error }, 'Herald did not take the records of an older herald mcp; the file stays, and the next start tries again');
        return;
      }
      messages += r.data.messages;
    }
  }
  await rename(file, `${file}.imported`);
  log.info({ file, messages }, 'imported the records of an older herald mcp into Herald; the file is renamed .imported');
}
