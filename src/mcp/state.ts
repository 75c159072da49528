import { mkdir, open as openFile, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RETENTION_MS } from '../modules/deliveries/delivery.js';

type SentMessage = { kind: 'post' | 'dm'; seq: number; sent_at: string; edits?: Record<string, number> };

/**
 * One sender's records: the connector's at the top of the file, each OAuth client's under `clients`.
 * Its pairing is not one of them: Herald keeps it (GET /mcp/pairing), whichever way the code was
 * redeemed. A file written before that may still hold a `pairing`: it is dropped when read.
 */
interface Records {
  /** Messages this sender sent, by request_id, with the last edit seq it used. */
  messages: Record<string, SentMessage>;
  /** An OAuth client's only: every request_id it sent (any kind), with when: what get_delivery shows it. */
  sent?: Record<string, string>;
}

/** What `herald mcp` remembers across restarts. */
export interface McpStateData extends Records {
  /** Each OAuth client's own records (`herald mcp --http`), by client id; absent until one sends or pairs. */
  clients?: Record<string, Records>;
}

/**
 * What one sender of `herald mcp` knows of what it did: its messages and their edit seqs. stdio and the static HERALD_MCP_TOKEN are the connector's (McpState itself); each OAuth
 * client of `herald mcp --http` has its own (McpState.forClient): one client's message is, to
 * another, one it never sent.
 */
export interface AgentRecords {
  message(requestId: string): SentMessage | undefined;
  rememberMessage(requestId: string, kind: 'post' | 'dm'): Promise<void>;
  nextSeq(requestId: string, editId?: string): Promise<number>;
  /** Whether this sender may see or act on what was sent under `requestId` (the connector: all the bridge token may). */
  owns(requestId: string): boolean;
  /**
   * Noted before the bridge sees `requestId`, so a retry after a lost answer is known as this
   * sender's own. Answers whether a delivery Herald already holds under that id is this sender's to
   * be answered as a replay: the connector's, always; a client's, only when it claimed it before.
   */
  claim(requestId: string): Promise<boolean>;
  /** Forgets a claim the bridge refused outright (nothing of this sender's is stored under it). */
  release(requestId: string): Promise<void>;
  /** Catches up with what another process sharing the file wrote (McpState): before a call reads. */
  sync(): Promise<void>;
}

/** Herald keeps records RETENTION_MS (8 days); an older message can no longer be edited. */
const MESSAGE_TTL_MS = RETENTION_MS;

const expired = (sentAt: string, now: number): boolean => now - Date.parse(sentAt) > MESSAGE_TTL_MS;

const messageIn = (records: Records, requestId: string): SentMessage | undefined => (Object.hasOwn(records.messages, requestId) ? records.messages[requestId] : undefined);

/** The next edit seq of a message in `records`, noted before it is used (see nextSeq). */
function nextSeqIn(records: Records, requestId: string, editId: string | undefined): number {
  const m = messageIn(records, requestId);
  if (m === undefined) throw new Error('unknown message');
  const earlier = editId === undefined ? undefined : m.edits?.[editId];
  if (earlier !== undefined) return earlier;
  m.seq += 1;
  if (editId !== undefined) m.edits = { ...(m.edits ?? {}), [editId]: m.seq };
  return m.seq;
}

function rememberIn(records: Records, requestId: string, kind: 'post' | 'dm', now: number): void {
  for (const [id, m] of Object.entries(records.messages)) {
    if (expired(m.sent_at, now)) delete records.messages[id];
  }
  records.messages[requestId] ??= { kind, seq: 0, sent_at: new Date(now).toISOString() };
}

/** A record read from a file of an older `herald mcp`, without the pairing it kept then (Herald keeps it now). */
function withoutPairing<T extends Records>(records: T & { pairing?: unknown }): T {
  const { pairing: _dropped, ...rest } = records;
  return rest as T;
}

/** How long a lock file may stand before it is taken for a crashed holder's and removed. */
const STALE_LOCK_MS = 10_000;
/** How often a process waiting for the lock looks again. */
const LOCK_POLL_MS = 5;

/**
 * A small JSON file, written atomically (temp file + rename) after every change, so a crash
 * never leaves half a state and an edit's seq is never reused. Itself the connector's records.
 *
 * Several `herald mcp --http` replicas may share one file (HERALD_MCP_STATE on a volume they all
 * mount): any replica then answers any call of an agent, whichever replica took its earlier ones
 * (the edit of a post another replica sent, its next edit seq). So every change is a
 * read-modify-write under a lock file (`<file>.lock`, created exclusively; one left by a crashed
 * holder is removed after STALE_LOCK_MS), re-reading the file first when another process changed
 * it, and every call re-reads it before it looks (sync).
 */
export class McpState implements AgentRecords {
  private data: McpStateData = { messages: {} };
  /** The OAuth clients' records (a Map: a client id is the token's word, never an object key in memory). */
  private readonly clients = new Map<string, Records>();
  /** Changes of this process, one at a time (the lock file orders them with other processes'). */
  private queue: Promise<unknown> = Promise.resolve();
  /** The file's inode, mtime and size as last read or written here (each write is a new file, renamed): another value means another process wrote it. */
  private seen = '';

  private constructor(private readonly file: string) {}

  static async open(file: string): Promise<McpState> {
    const state = new McpState(file);
    await state.sync();
    return state;
  }

  /** Re-reads the file when another process changed it since this one last read or wrote it. */
  async sync(): Promise<void> {
    let now: string;
    try {
      const st = await stat(this.file);
      now = `${st.ino}:${st.mtimeMs}:${st.size}`;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`cannot read ${this.file}: ${(err as Error).message}`);
    }
    if (now === this.seen) return;
    let read: McpStateData;
    try {
      read = JSON.parse(await readFile(this.file, 'utf8')) as McpStateData;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`cannot read ${this.file}: ${(err as Error).message}`);
    }
    read.messages ??= {};
    this.clients.clear();
    for (const [id, records] of Object.entries(read.clients ?? {})) this.clients.set(id, { ...withoutPairing(records), messages: records.messages ?? {} });
    delete read.clients;
    this.data = withoutPairing(read);
    this.seen = now;
  }

  message(requestId: string): SentMessage | undefined {
    return messageIn(this.data, requestId);
  }

  async rememberMessage(requestId: string, kind: 'post' | 'dm'): Promise<void> {
    await this.change(() => rememberIn(this.data, requestId, kind, Date.now()));
  }

  /**
   * The next edit seq for a message, stored before it is used. With the edit's own id (edit_id):
   * the seq that edit was given before, if it was, so a retried edit is the very same request.
   */
  async nextSeq(requestId: string, editId?: string): Promise<number> {
    return this.change(() => nextSeqIn(this.data, requestId, editId));
  }

  /** The connector holds the bridge token: what it may see through Herald's API, it may see here. */
  owns(): boolean {
    return true;
  }

  claim(): Promise<boolean> {
    return Promise.resolve(true);
  }

  release(): Promise<void> {
    return Promise.resolve();
  }

  /** An OAuth client's own records, kept in this same file under `clients`. */
  forClient(clientId: string): AgentRecords {
    const records = (): Records | undefined => this.clients.get(clientId);
    const own = (): Records => {
      let r = this.clients.get(clientId);
      if (r === undefined) this.clients.set(clientId, (r = { messages: {} }));
      return r;
    };
    return {
      message: (requestId) => {
        const r = records();
        return r === undefined ? undefined : messageIn(r, requestId);
      },
      rememberMessage: (requestId, kind) => this.change(() => rememberIn(own(), requestId, kind, Date.now())),
      nextSeq: (requestId, editId) => this.change(() => nextSeqIn(own(), requestId, editId)),
      owns: (requestId) => {
        const r = records();
        return r !== undefined && ((r.sent !== undefined && Object.hasOwn(r.sent, requestId)) || messageIn(r, requestId) !== undefined);
      },
      claim: (requestId) =>
        this.change(() => {
          const r = own();
          const now = Date.now();
          const sent = Object.fromEntries(Object.entries(r.sent ?? {}).filter(([, at]) => !expired(at, now)));
          const before = Object.hasOwn(sent, requestId);
          if (!before) sent[requestId] = new Date(now).toISOString();
          r.sent = sent;
          return before;
        }),
      release: (requestId) =>
        this.change(() => {
          const r = records();
          if (r?.sent === undefined || !Object.hasOwn(r.sent, requestId)) return;
          r.sent = Object.fromEntries(Object.entries(r.sent).filter(([id]) => id !== requestId));
        }),
      sync: () => this.sync(),
    };
  }

  /**
   * One change, whole: under the lock, the file re-read if another process wrote it, `apply`d to
   * the records, written back; its answer once written (a seq is never handed out unsaved).
   */
  private change<T>(apply: () => T): Promise<T> {
    const run = this.queue.then(() =>
      this.locked(async () => {
        await this.sync();
        const answer = apply();
        await this.save();
        return answer;
      }),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Runs `fn` holding `<file>.lock`, which no other process holds meanwhile. */
  private async locked<T>(fn: () => Promise<T>): Promise<T> {
    const lock = `${this.file}.lock`;
    await mkdir(path.dirname(this.file), { recursive: true });
    for (;;) {
      try {
        const handle = await openFile(lock, 'wx', 0o600);
        await handle.close();
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const held = await stat(lock).then((st) => Date.now() - st.mtimeMs, () => 0);
        if (held > STALE_LOCK_MS) await unlink(lock).catch(() => undefined);
        else await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
      }
    }
    try {
      return await fn();
    } finally {
      await unlink(lock).catch(() => undefined);
    }
  }

  private async save(): Promise<void> {
    // The connector's records as they always were; the clients' after them, only once there are any.
    const data: McpStateData = this.clients.size === 0 ? this.data : { ...this.data, clients: Object.fromEntries(this.clients) };
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(data, null, 2), { mode: 0o600 });
    await rename(tmp, this.file);
    const st = await stat(this.file);
    this.seen = `${st.ino}:${st.mtimeMs}:${st.size}`;
  }
}
