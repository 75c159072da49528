import type { components } from '../../generated/api.js';

// What a message is to a platform: going out (what Herald sends, with its files), and coming back
// (what the platform shows, what others write), and where it lives. Re-exported by platform.ts.

/** A platform's name, as its folder registers it (src/platforms/platforms.ts). */
export type TransportName = string;

/**
 * A message as a platform is asked to show it: the contract's message body (content, card, links,
 * attachments), with the attached files' bytes in `files` (read from Herald's file store for the send).
 */
export type OutgoingMessage = components['schemas']['WireBody'] & { files?: readonly OutgoingFile[]; replyTo?: string };

/** A file sent with a message: the name and description its attachment gives, and the stored bytes. */
export interface OutgoingFile {
  filename: string;
  description?: string;
  contentType: string;
  data: Buffer;
}

/** What one message may carry in files, on a platform that attaches them (Discord: 10 MiB a file by default, 10 files, 25 MiB in all). */
export interface FileLimits {
  maxFileBytes: number;
  maxFiles: number;
  maxRequestBytes: number;
}

/** A channel on a named transport. */
export interface Address {
  transport: TransportName;
  channelId: string;
}

export interface SentMessage {
  channelId: string;
  messageId: string;
  /**
   * False when the platform gave no proof it took the message (an IRC server without
   * labeled-response/echo-message): the delivery is reported unconfirmed, never delivered.
   */
  confirmed?: boolean;
}

export interface SeenMessage extends SentMessage {
  authorId: string;
  /** When the platform created it. */
  createdAt: Date;
  /** What the message shows, in the same shape as `History.fingerprint(OutgoingMessage)`. */
  fingerprint: string;
}

export interface ChannelInfo {
  id: string;
  guildId: string | undefined;
  name?: string | undefined;
  isText: boolean;
  /** A thread's parent channel (absent: not a thread). */
  parentId?: string;
}

export interface MemberInfo {
  userId: string;
  displayName: string;
  bot: boolean;
}

/** A message someone else wrote, as a platform delivers it to Herald. */
export interface InboundMessage extends SentMessage {
  authorId: string;
  authorIsBot: boolean;
  guildId: string | undefined;
  content: string;
  createdAt: Date;
  /** What the inbound inbox keeps besides (absent where the platform does not say). */
  heard?: HeardDetails;
}

/** An inbound message's details for the inbound inbox: who, where, what it answers, what it carries. */
export interface HeardDetails {
  authorName: string | null;
  /** The users it mentions (ids). */
  mentions: readonly string[];
  /** The thread it was written in (its own channel id), if any. */
  threadId: string | null;
  /** The message it replies to, if any. */
  replyTo: string | null;
  /** Files, as metadata only. */
  attachments: readonly { id: string; filename: string; contentType: string | null; size: number | null; url: string }[];
}

/** A reaction someone added to a message, as a platform delivers it. */
export interface InboundReaction {
  channelId: string;
  guildId: string | undefined;
  messageId: string;
  userId: string;
  /** A Unicode emoji, or `name:id` for a custom one. */
  emoji: string;
}

/** A file attached to a message. */
export interface ArchivedAttachment {
  id: string;
  url: string;
  filename: string;
  contentType: string | null;
  size: number | null;
}

/** The media parts of an embed (a link preview, an image, a video). */
export interface ArchivedEmbed {
  type: string | null;
  url: string | null;
  image: string | null;
  thumbnail: string | null;
  video: string | null;
}

/** A message as the media archive reads it: who, when, its text, and what media it carries. */
export interface ArchivedMessage {
  id: string;
  channelId: string;
  authorId: string;
  authorName: string | null;
  createdAt: Date;
  content: string;
  attachments: ArchivedAttachment[];
  embeds: ArchivedEmbed[];
}

/** A channel's history read backwards a page at a time, resumable from the oldest id read. */
export interface HistoryPages {
  /**
   * Up to `limit` messages older than `beforeId` (the newest when absent), newest first. Fewer than
   * `limit` means the start of the channel was reached.
   */
  pageBefore(channelId: string, beforeId: string | undefined, limit: number, signal: AbortSignal): Promise<ArchivedMessage[]>;
}
