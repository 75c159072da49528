import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../infra/clock.js';
import { DomainError, errorSummary, InvalidRequestError } from '../../infra/errors.js';
import { blobRelativePath, type MediaDownloader } from '../archive/index.js';
import { findDownload, findFile, pruneFiles, recordDownload, touchFiles, upsertFile } from './files.repository.js';
import type { FileRow, FilesDb } from './files.table.js';
import type { components } from '../../../generated/api.js';
import type { FileLimits, OutgoingFile } from '../../platforms/platform.js';

export type StoredFile = components['schemas']['StoredFile'];
type Attachment = components['schemas']['Attachment'];

/** The contract's reasons (openapi/files.yaml). */
export const FILE_TOO_LARGE = 'file is larger than HERALD_FILE_MAX_BYTES';
export const FILE_EMPTY = 'file must not be empty';
export const UNKNOWN_FILE = 'body.attachments[].file is not a stored file: upload it with POST /mcp/files';
export const FILE_OVER_PLATFORM_LIMIT = "body.attachments[].file is larger than the platform's limit for one file";
export const FILES_OVER_MESSAGE_LIMIT = "body.attachments total more than the platform's limit for one message";
export const FILES_UNSUPPORTED = 'body.attachments cannot be sent on this platform';

/** A body larger than the store takes: nothing was stored. */
export class FileTooLargeError extends DomainError {
  constructor() {
    super(FILE_TOO_LARGE);
  }
}

/** The reason an upload past the caller's cap is refused with (the contract's PolicyRefused). */
export const FILES_QUOTA = 'refused by policy: files';

/** An upload that would take a caller's stored uploads past its cap (policy rule files.max_total_bytes). */
export class FilesQuotaError extends DomainError {
  constructor() {
    super(FILES_QUOTA);
  }
}

/** A caller an upload is counted for, and its cap (undefined: counted, not capped). */
export interface UploadSubject {
  subject: string;
  maxTotalBytes: number | undefined;
}

export interface FileStoreOptions {
  /** HERALD_DATA_DIR/files. */
  dir: string;
  /** HERALD_FILE_MAX_BYTES. */
  maxBytes: number;
  /** HERALD_FILE_TTL_HOURS, in ms: an unreferenced file is deleted this long after its last use. */
  ttlMs: number;
  log: Logger;
}

/**
 * The content-addressed file store of files out and in: bytes under `dir` by their SHA-256 (the
 * media archive's layout), one row per file. Bytes are streamed through the digest with the size
 * cap, then moved into place in the transaction that records them.
 */
export class FileStore {
  constructor(
    private readonly db: Kysely<FilesDb>,
    private readonly clock: Clock,
    readonly options: FileStoreOptions,
  ) {}

  pathOf(sha256: string): string {
    return path.join(this.options.dir, blobRelativePath(sha256));
  }

  /**
   * Bytes the store holds of each subject's uploads (a pruned file no longer counts), and so how
   * many more the tightest cap among them lets in (Infinity with no cap).
   */
  async uploadRoom(subjects: readonly UploadSubject[]): Promise<number> {
    const capped = subjects.filter((s) => s.maxTotalBytes !== undefined);
    if (capped.length === 0) return Infinity;
    const used = await this.uploadedBytes(capped.map((s) => s.subject));
    return Math.min(...capped.map((s) => (s.maxTotalBytes as number) - (used.get(s.subject) ?? 0)));
  }

  private async uploadedBytes(subjects: readonly string[]): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom('file_uploads as u')
      .innerJoin('files as f', 'f.sha256', 'u.sha256')
      .select(['u.subject', sql<string>`sum(f.size_bytes)`.as('bytes')])
      .where('u.subject', 'in', [...subjects])
      .groupBy('u.subject')
      .execute();
    return new Map(rows.map((r) => [r.subject, Number(r.bytes)]));
  }

  /**
   * Count a stored upload for its subjects; refused (FilesQuotaError, the count undone) when that
   * takes a capped subject past its cap: two replicas racing for the last bytes may both be refused,
   * never both let through. The same bytes again by the same subject count once.
   */
  async countUpload(subjects: readonly UploadSubject[], file: StoredFile): Promise<void> {
    if (subjects.length === 0) return;
    const now = this.clock.now();
    const added = await this.db
      .insertInto('file_uploads')
      .values(subjects.map((s) => ({ subject: s.subject, sha256: file.sha256, at: now })))
      .onConflict((oc) => oc.doNothing())
      .returning('subject')
      .execute();
    if (added.length === 0 || (await this.uploadRoom(subjects)) >= 0) return;
    await this.db.deleteFrom('file_uploads').where('sha256', '=', file.sha256).where('subject', 'in', added.map((a) => a.subject)).execute();
    throw new FilesQuotaError();
  }

  /**
   * Whether the caller's caps let these bytes in: bytes every capped subject holds already count
   * nothing; others must fit in what the tightest cap leaves (FilesQuotaError when not).
   */
  async admit(subjects: readonly UploadSubject[], sha256: string, size: number): Promise<void> {
    const capped = subjects.filter((s) => s.maxTotalBytes !== undefined);
    if (capped.length === 0) return;
    const held = await this.db.selectFrom('file_uploads').select('subject').where('sha256', '=', sha256).where('subject', 'in', capped.map((s) => s.subject)).execute();
    if (held.length === capped.length) return;
    if (size > (await this.uploadRoom(capped))) throw new FilesQuotaError();
  }

  /** Store a body (an upload's), refusing it past the size cap while it streams; `admit` may refuse it once its digest is known, before it is kept. */
  async store(source: Readable, meta: { filename: string; contentType: string }, admit?: (sha256: string, size: number) => Promise<void>): Promise<StoredFile> {
    const tmpDir = path.join(this.options.dir, 'tmp');
    await mkdir(tmpDir, { recursive: true });
    const tmp = path.join(tmpDir, randomUUID());
    try {
      const hash = createHash('sha256');
      const maxBytes = this.options.maxBytes;
      let size = 0;
      await pipeline(
        source,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            size += chunk.length;
            if (size > maxBytes) throw new FileTooLargeError();
            hash.update(chunk);
            yield chunk;
          }
        },
        createWriteStream(tmp, { mode: 0o600 }),
      );
      if (size === 0) throw new InvalidRequestError(FILE_EMPTY);
      const sha256 = hash.digest('hex');
      await admit?.(sha256, size);
      return await this.keep(tmp, { sha256, size, ...meta });
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Move a written file into place and record it, in one transaction (see upsertFile). */
  private async keep(tmp: string, file: { sha256: string; size: number; filename: string; contentType: string }): Promise<StoredFile> {
    const final = this.pathOf(file.sha256);
    await mkdir(path.dirname(final), { recursive: true });
    const { row, existing } = await this.db.transaction().execute(async (trx) => {
      const upserted = await upsertFile(trx, { ...file, now: this.clock.now() });
      // Same bytes, same name: replacing it is harmless, and undoes a prune that removed it meanwhile.
      await rename(tmp, final);
      return upserted;
    });
    return toStoredFile(row, file.filename, existing);
  }

  async find(sha256: string): Promise<FileRow | undefined> {
    return /^[0-9a-f]{64}$/.test(sha256) ? findFile(this.db, sha256) : undefined;
  }

  /**
   * Check a delivery's attachments before it is queued: every file stored (marked used now, so it
   * does not expire before the delivery's row lists it), within the platform's limits.
   */
  async checkAttachments(attachments: readonly Attachment[], limits: FileLimits | undefined): Promise<void> {
    if (attachments.length === 0) return;
    if (limits === undefined) throw new InvalidRequestError(FILES_UNSUPPORTED);
    const shas = [...new Set(attachments.map((a) => a.file))];
    const rows = new Map((await touchFiles(this.db, shas, this.clock.now())).map((r) => [r.sha256, r]));
    let total = 0;
    for (const a of attachments) {
      const row = rows.get(a.file);
      if (row === undefined) throw new InvalidRequestError(UNKNOWN_FILE);
      const size = Number(row.size_bytes);
      if (size > limits.maxFileBytes) throw new InvalidRequestError(FILE_OVER_PLATFORM_LIMIT);
      total += size;
    }
    if (attachments.length > limits.maxFiles) throw new InvalidRequestError('body.attachments must have at most 10 items');
    if (total > limits.maxRequestBytes) throw new InvalidRequestError(FILES_OVER_MESSAGE_LIMIT);
  }

  /** A delivery's attachments with their bytes, for the send; undefined when a file is gone. */
  async bytesOf(attachments: readonly Attachment[]): Promise<OutgoingFile[] | undefined> {
    const out: OutgoingFile[] = [];
    for (const a of attachments) {
      const row = await findFile(this.db, a.file);
      if (row === undefined) return undefined;
      const data = await readFile(this.pathOf(a.file)).catch(() => undefined);
      if (data === undefined) return undefined;
      out.push({ filename: a.filename, ...(a.description !== undefined ? { description: a.description } : {}), contentType: row.content_type, data });
    }
    return out;
  }

  /**
   * Fetch one attachment of a platform message into the store, once: the same attachment again
   * answers the stored file without a second download.
   */
  async fetchAttachment(
    key: { transport: string; channelId: string; messageId: string; attachmentId: string },
    attachment: { url: string; filename: string },
    downloader: MediaDownloader,
    signal: AbortSignal,
  ): Promise<StoredFile | { refused: string } | { failed: string }> {
    const known = await findDownload(this.db, key);
    if (known !== undefined) {
      const row = (await touchFiles(this.db, [known.sha256], this.clock.now()))[0];
      if (row !== undefined) return toStoredFile(row, known.filename, true);
    }
    const unlimited = { reserve: async () => ({ ok: true as const, reservation: '' }), release: async () => undefined };
    const got = await downloader.download(attachment.url, signal, unlimited);
    if (!got.ok) {
      if ('noRoom' in got) return { failed: 'no room to store it' };
      return got.refused ? { refused: got.reason } : { failed: got.reason };
    }
    // The downloader wrote it under the store's folder (its own layout, the same as ours).
    const row = await this.db.transaction().execute(async (trx) => {
      const { row: stored } = await upsertFile(trx, { sha256: got.sha256, size: got.size, contentType: got.contentType, filename: attachment.filename, now: this.clock.now() });
      await recordDownload(trx, key, got.sha256, attachment.filename, this.clock.now());
      return stored;
    });
    return toStoredFile(row, attachment.filename, false);
  }

  /** Delete files unused for the TTL that no delivery lists. */
  async prune(now: Date): Promise<number> {
    return pruneFiles(this.db, new Date(now.getTime() - this.options.ttlMs), async (sha) => {
      await rm(this.pathOf(sha), { force: true }).catch((err: unknown) => this.options.log.warn({ err: errorSummary(err) }, 'could not remove an expired file'));
    });
  }
}

export function toStoredFile(row: FileRow, filename: string, existing: boolean): StoredFile {
  return { file: row.sha256, sha256: row.sha256, size: Number(row.size_bytes), content_type: row.content_type, filename, url: `/mcp/files/${row.sha256}`, existing };
}
