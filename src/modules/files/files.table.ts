import type { ColumnType, Selectable } from 'kysely';

/** PostgreSQL's bigint: read as a string (pg) or number; written as a number. */
type BigInt = ColumnType<string | number, number, number>;

/**
 * A stored file, by the SHA-256 of its bytes (its id): an agent's upload, or an attachment Herald
 * fetched for it. The bytes live under HERALD_DATA_DIR/files, at `blobRelativePath(sha256)`.
 */
export interface FileTable {
  sha256: string;
  size_bytes: BigInt;
  /** As given when the bytes were first stored. */
  content_type: string;
  /** As given when the bytes were first stored (a delivery names each attachment itself). */
  filename: string;
  created_at: Date;
  /** Last uploaded, attached to a delivery or fetched: an unreferenced file expires a while after it. */
  used_at: Date;
}

/** Which platform attachment a fetched file came from: one attachment is fetched once. */
export interface AttachmentDownloadTable {
  transport: string;
  channel_id: string;
  message_id: string;
  attachment_id: string;
  sha256: string;
  filename: string;
  created_at: Date;
}

/** Who uploaded a stored file (`connector` or `client:<OAuth client id>`), for the policy's per-caller upload cap. */
export interface FileUploadTable {
  subject: string;
  sha256: string;
  at: Date;
}

export type FileRow = Selectable<FileTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface FilesDb {
  files: FileTable;
  attachment_downloads: AttachmentDownloadTable;
  file_uploads: FileUploadTable;
}
