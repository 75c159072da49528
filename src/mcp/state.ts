import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RETENTION_MS } from '../modules/deliveries/delivery.js';

/** What `herald mcp` remembers across restarts. */
export interface McpStateData {
  /** The Discord user this server is paired with (from /agent pair → redeem). */
  pairing?: { user_id: string; generation: string; paired_at: string };
  /** Messages this server sent, by request_id, with the last edit seq it used. */
  messages: Record<string, { kind: 'post' | 'dm'; seq: number; sent_at: string; edits?: Record<string, number> }>;
}

/** Herald keeps records RETENTION_MS (8 days); an older message can no longer be edited. */
const MESSAGE_TTL_MS = RETENTION_MS;

/**
 * A small JSON file, written atomically (temp file + rename) after every change, so a crash
 * never leaves half a state and an edit's seq is never reused.
 */
export class McpState {
  private data: McpStateData = { messages: {} };
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly file: string) {}

  static async open(file: string): Promise<McpState> {
    const state = new McpState(file);
    try {
      state.data = JSON.parse(await readFile(file, 'utf8')) as McpStateData;
      state.data.messages ??= {};
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read ${file}: ${(err as Error).message}`);
    }
    return state;
  }

  get pairing(): McpStateData['pairing'] {
    return this.data.pairing;
  }

  async setPairing(userId: string, generation: string): Promise<void> {
    this.data.pairing = { user_id: userId, generation, paired_at: new Date().toISOString() };
    await this.save();
  }

  message(requestId: string): McpStateData['messages'][string] | undefined {
    return this.data.messages[requestId];
  }

  async rememberMessage(requestId: string, kind: 'post' | 'dm'): Promise<void> {
    const now = Date.now();
    for (const [id, m] of Object.entries(this.data.messages)) {
      if (now - Date.parse(m.sent_at) > MESSAGE_TTL_MS) delete this.data.messages[id];
    }
    this.data.messages[requestId] ??= { kind, seq: 0, sent_at: new Date(now).toISOString() };
    await this.save();
  }

  /**
   * The next edit seq for a message, stored before it is used. With the edit's own id (edit_id):
   * the seq that edit was given before, if it was, so a retried edit is the very same request.
   */
  async nextSeq(requestId: string, editId?: string): Promise<number> {
    const m = this.data.messages[requestId];
    if (m === undefined) throw new Error('unknown message');
    const earlier = editId === undefined ? undefined : m.edits?.[editId];
    if (earlier !== undefined) return earlier;
    m.seq += 1;
    if (editId !== undefined) m.edits = { ...(m.edits ?? {}), [editId]: m.seq };
    await this.save();
    return m.seq;
  }

  private save(): Promise<void> {
    const snapshot = JSON.stringify(this.data, null, 2);
    this.writing = this.writing.then(async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      const tmp = `${this.file}.${process.pid}.tmp`;
      await writeFile(tmp, snapshot, { mode: 0o600 });
      await rename(tmp, this.file);
    });
    return this.writing;
  }
}
