import type { components } from '../../../generated/api.js';
import type { ArchivedMessage } from '../../platforms/platform.js';
import type { ArchiveActionRow, MediaItemRow, MediaKind, MediaScrapeRow, MediaSource } from './archive.table.js';

/** The contract's shapes: the same plain JSON objects over HTTP, in the MCP tools and in the UI. */
export type ScrapeJob = components['schemas']['ScrapeJob'];
export type MediaItem = components['schemas']['MediaItem'];
export type StorageStatus = components['schemas']['StorageStatus'];
export type ArchiveAction = components['schemas']['ArchiveAction'];

/** One piece of media found in a message, before it is indexed. */
export interface FoundMedia {
  source: MediaSource;
  /** Which part of the message: with the message id, the item's identity across re-reads. */
  sourceKey: string;
  url: string;
  kind: MediaKind;
  filename: string | null;
  contentType: string | null;
  size: number | null;
}

const EXTENSION_KINDS: Record<string, MediaKind> = {
  png: 'image', jpg: 'image', jpeg: 'image', gif: 'image', webp: 'image', avif: 'image', bmp: 'image',
  mp4: 'video', webm: 'video', mov: 'video', mkv: 'video',
  mp3: 'audio', ogg: 'audio', wav: 'audio', m4a: 'audio', flac: 'audio', opus: 'audio',
};
/** Links in a message's text that point at a media file (by its extension). */
const MEDIA_LINK = /https?:\/\/[^\s<>()"']+?\.(png|jpe?g|gif|webp|avif|bmp|mp4|webm|mov|mkv|mp3|ogg|wav|m4a|flac|opus)(\?[^\s<>()"']*)?(?=$|[\s<>()"'])/gi;

function extensionOf(url: string): string | undefined {
  try {
    const name = new URL(url).pathname.split('/').pop() ?? '';
    const dot = name.lastIndexOf('.');
    return dot < 0 ? undefined : name.slice(dot + 1).toLowerCase();
  } catch {
    return undefined;
  }
}

function filenameOf(url: string): string | null {
  try {
    const name = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
    return name === '' ? null : name;
  } catch {
    return null;
  }
}

/** A kind from the declared content type, else from the file's extension. */
export function kindOf(contentType: string | null, url: string): MediaKind {
  const major = contentType?.split('/')[0]?.toLowerCase();
  if (major === 'image' || major === 'video' || major === 'audio') return major;
  return EXTENSION_KINDS[extensionOf(url) ?? ''] ?? 'file';
}

/**
 * Every piece of media in a message: attachments, embeds' images, thumbnails and videos, and
 * media links in its text; a URL found twice in one message (a link and its preview) counts once.
 */
export function mediaOf(message: ArchivedMessage): FoundMedia[] {
  const found: FoundMedia[] = [];
  const seen = new Set<string>();
  const add = (m: FoundMedia): void => {
    if (seen.has(m.url)) return;
    seen.add(m.url);
    found.push(m);
  };
  for (const a of message.attachments) {
    add({ source: 'attachment', sourceKey: `a:${a.id}`, url: a.url, kind: kindOf(a.contentType, a.url), filename: a.filename, contentType: a.contentType, size: a.size });
  }
  message.embeds.forEach((e, i) => {
    for (const part of ['image', 'video', 'thumbnail'] as const) {
      const url = e[part];
      if (url === null) continue;
      const kind = part === 'video' ? 'video' : kindOf(null, url) === 'file' ? 'image' : kindOf(null, url);
      add({ source: 'embed', sourceKey: `e${i}:${part}`, url, kind, filename: filenameOf(url), contentType: null, size: null });
    }
  });
  let n = 0;
  for (const match of message.content.matchAll(MEDIA_LINK)) {
    const url = match[0];
    add({ source: 'link', sourceKey: `l:${n++}`, url, kind: kindOf(null, url), filename: filenameOf(url), contentType: null, size: null });
  }
  return found;
}

const iso = (d: Date): string => d.toISOString();
const num = (v: string | number | null): number => (v === null ? 0 : Number(v));

export function toScrapeJob(row: MediaScrapeRow): ScrapeJob {
  return {
    id: row.id,
    channelId: row.channel_id,
    channelName: row.channel_name,
    guildId: row.guild_id,
    mode: row.mode,
    state: row.state,
    pauseReason: row.pause_reason,
    cursor: row.cursor,
    messagesSeen: row.messages_seen,
    itemsFound: row.items_found,
    bytes: num(row.bytes),
    errors: row.errors,
    lastError: row.last_error,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at),
  };
}

export function toMediaItem(row: MediaItemRow, mediaDir: string, messageLinkBase: string): MediaItem {
  return {
    id: String(row.id),
    scrapeId: row.scrape_id,
    channelId: row.channel_id,
    guildId: row.guild_id,
    messageId: row.message_id,
    messageUrl: `${messageLinkBase}/channels/${row.guild_id ?? '@me'}/${row.channel_id}/${row.message_id}`,
    authorId: row.author_id,
    authorName: row.author_name,
    postedAt: iso(row.posted_at),
    kind: row.kind,
    source: row.source,
    url: row.url,
    filename: row.filename,
    contentType: row.content_type,
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    sha256: row.sha256,
    localPath: row.sha256 === null ? null : blobPath(mediaDir, row.sha256),
    state: row.state,
    error: row.error,
    content: row.content,
  };
}

export function toArchiveAction(row: ArchiveActionRow): ArchiveAction {
  return { id: String(row.id), at: iso(row.at), actor: row.actor, via: row.via, action: row.action, target: row.target, result: row.result, detail: row.detail };
}

/** Where a stored file lives: two levels of fan-out by digest, so no folder grows huge. */
export function blobRelativePath(sha256: string): string {
  return `${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
}

export function blobPath(mediaDir: string, sha256: string): string {
  return `${mediaDir}/${blobRelativePath(sha256)}`;
}
