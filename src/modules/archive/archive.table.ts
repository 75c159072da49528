import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/** PostgreSQL's bigint: read as a string (pg) or number; written as a number. */
type BigInt = ColumnType<string | number, number, number>;

export type ScrapeMode = 'links' | 'download';
export type ScrapeState = 'running' | 'paused' | 'stopped' | 'completed' | 'failed';
export type MediaKind = 'image' | 'video' | 'audio' | 'file';
export type MediaSource = 'attachment' | 'embed' | 'link';
export type ItemState = 'linked' | 'stored' | 'refused' | 'failed';

/** A scrape of one channel: its own outbox job, one history page per step, resumable from `cursor`. */
export interface MediaScrapeTable {
  id: string;
  channel_id: string;
  /** The channel's name when the scrape started, for people (null where the platform gave none). */
  channel_name: string | null;
  guild_id: string | null;
  mode: ScrapeMode;
  state: ScrapeState;
  pause_reason: string | null;
  /** The oldest message id read so far: the next page is read before it. */
  cursor: string | null;
  messages_seen: number;
  items_found: number;
  bytes: BigInt;
  errors: number;
  last_error: string | null;
  attempts: number;
  next_step_at: Date;
  lease_owner: string | null;
  lease_token: string | null;
  lease_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** A stored file, by content: one row (and one file) however many items reference it. */
export interface MediaBlobTable {
  sha256: string;
  size_bytes: BigInt;
  content_type: string;
  /** Relative to the media folder. */
  path: string;
  created_at: Date;
}

/** The one row of storage accounting: bytes of every stored file (kept equal to media_blobs' sum by a trigger). */
export interface MediaStorageTable {
  id: number;
  used_bytes: BigInt;
}

/**
 * Room taken for one file before it is written, held under the scrape step's lease: a reservation
 * whose step lost its lease (or whose process died) no longer counts.
 */
export interface MediaReservationTable {
  id: string;
  scrape_id: string;
  lease_owner: string;
  /** With the owner, the claim of the scrape the step runs under. */
  lease_expires_at: Date;
  bytes: BigInt;
  created_at: Date;
}

/** One piece of media one message carried (an attachment, an embed's image, a link). */
export interface MediaItemTable {
  id: Generated<string>;
  scrape_id: string;
  channel_id: string;
  guild_id: string | null;
  message_id: string;
  author_id: string;
  author_name: string | null;
  posted_at: Date;
  kind: MediaKind;
  source: MediaSource;
  source_key: string;
  url: string;
  filename: string | null;
  content_type: string | null;
  size_bytes: BigInt | null;
  sha256: string | null;
  state: ItemState;
  error: string | null;
  content: string;
}

/** The request_id a start was given, and the scrape it started or resumed (gone with the scrape). */
export interface MediaScrapeRequestTable {
  request_id: string;
  scrape_id: string;
  at: Date;
}

/** Who did what to the archive, when, and how it ended. */
export interface ArchiveActionTable {
  id: Generated<string>;
  at: Date;
  actor: string;
  via: 'http' | 'mcp' | 'ui' | 'discord';
  action: string;
  target: string | null;
  result: 'ok' | 'refused' | 'error';
  detail: string | null;
}

export type MediaScrapeRow = Selectable<MediaScrapeTable>;
export type MediaItemRow = Selectable<MediaItemTable>;
export type NewMediaItem = Insertable<MediaItemTable>;
export type ArchiveActionRow = Selectable<ArchiveActionTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface ArchiveDb {
  media_scrapes: MediaScrapeTable;
  media_scrape_requests: MediaScrapeRequestTable;
  media_items: MediaItemTable;
  media_blobs: MediaBlobTable;
  media_storage: MediaStorageTable;
  media_reservations: MediaReservationTable;
  archive_actions: ArchiveActionTable;
}
