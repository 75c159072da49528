import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import type { Platform } from '../../platforms/platform.js';
import type { MediaDownloader } from '../archive/index.js';
import type { FileStore, StoredFile } from './files.service.js';

/** What the files module asks the others: which channels the agent may read. */
export interface ReadableChannels {
  /** Channels of the home platform that destinations map to. */
  mapped(): Promise<readonly string[]>;
  /** Users registered now (their DM channels are readable). */
  registered(): Promise<readonly string[]>;
}

type Outcome = StoredFile | { status: 400 | 403 | 404 | 422 | 502; error: string };

/**
 * Files in: an attachment of a message the agent can read (in a mapped destination's channel, or
 * a DM with a registered user), fetched through the media archive's downloader into the file store.
 */
export class AttachmentReader {
  constructor(
    private readonly home: Platform,
    private readonly channels: ReadableChannels,
    private readonly downloader: MediaDownloader,
    private readonly log: Logger,
  ) {}

  async fetch(input: { channel_id: string; message_id: string; attachment_id: string }, files: FileStore): Promise<Outcome> {
    const pages = this.home.pages;
    if (pages === undefined) return { status: 400, error: 'this platform cannot read messages' };
    const signal = AbortSignal.timeout(60_000);
    try {
      if (!(await this.readable(input.channel_id, signal))) return { status: 403, error: 'channel_id is not a channel the agent can read' };
      // The one message: the page of one message before the id after it.
      const page = await pages.pageBefore(input.channel_id, (BigInt(input.message_id) + 1n).toString(), 1, signal);
      const message = page.find((m) => m.id === input.message_id);
      if (message === undefined) return { status: 404, error: 'message not found' };
      const attachment = message.attachments.find((a) => a.id === input.attachment_id);
      if (attachment === undefined) return { status: 404, error: 'attachment not found' };
      const key = { transport: this.home.name, channelId: input.channel_id, messageId: input.message_id, attachmentId: input.attachment_id };
      const got = await files.fetchAttachment(key, attachment, this.downloader, signal);
      if ('refused' in got) return { status: 422, error: `refused: ${got.refused}` };
      if ('failed' in got) return { status: 502, error: `could not fetch the attachment: ${got.failed}` };
      return got;
    } catch (err) {
      this.log.warn({ err: errorSummary(err) }, 'attachment download failed');
      return { status: 502, error: 'the platform could not be reached' };
    }
  }

  /** A mapped destination's channel, or the DM channel of a registered user. */
  private async readable(channelId: string, signal: AbortSignal): Promise<boolean> {
    if ((await this.channels.mapped()).includes(channelId)) return true;
    const dms = this.home.dms;
    if (dms === undefined) return false;
    for (const userId of await this.channels.registered()) {
      if ((await dms.openDm(userId, signal)) === channelId) return true;
    }
    return false;
  }
}
