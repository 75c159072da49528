import path from 'node:path';
import type { ModuleParts, ModuleServices } from '../contract.js';
import type { FileStoreLimits } from './settings.js';
import { tablesOf } from '../../infra/db/tables.js';
import { DISCORD_MEDIA_HOSTS, MediaDownloader } from '../archive/index.js';
import { deliveriesModule } from '../deliveries/index.js';
import { destinationsModule } from '../destinations/index.js';
import { identityModule } from '../identity/index.js';
import { AttachmentReader } from './attachments.js';
import { fileOperations, fileRoutes } from './files.http.js';
import { FileStore } from './files.service.js';
import type { FilesDb } from './files.table.js';

/** How long fetching one attachment may take. */
const DOWNLOAD_TIMEOUT_MS = 30_000;

/** Start files out and in (the declaration is index.ts). */
export async function startFiles({ config, settings, db: tables, clock, log, transports, site, use }: ModuleServices<FileStoreLimits>): Promise<ModuleParts<{ files: FileStore }>> {
  const db = tablesOf<FilesDb>(tables);
  const dir = path.join(config.dataDir, 'files');
  const files = new FileStore(db, clock, { dir, maxBytes: settings.maxBytes, ttlMs: settings.ttlHours * 3_600_000, log });
  // The send engine asks this module for a delivery's files: checked before it is queued, read for the send.
  use(deliveriesModule).answer({
    checkAttachments: (attachments, limits) => files.checkAttachments(attachments, limits),
    attachmentBytes: (attachments) => files.bytesOf(attachments),
  });
  const { destinations } = use(destinationsModule);
  const { identity } = use(identityModule);
  const home = transports.home;
  // Files in: the media archive's downloader (its hosts, no redirects, no private addresses), into this store's folder.
  const downloader = new MediaDownloader(dir, { hosts: DISCORD_MEDIA_HOSTS, trustedOrigins: site.mediaOrigins, maxBytes: settings.maxBytes, timeoutMs: DOWNLOAD_TIMEOUT_MS });
  const reader = new AttachmentReader(
    home,
    {
      mapped: async () => (await destinations.list()).flatMap((m) => (m.channel_id !== undefined ? [m.channel_id] : [])),
      registered: async () => (await identity.recipients()).items.map((r) => r.user_id),
    },
    downloader,
    log,
  );
  return {
    gives: { files },
    operations: [fileOperations(files, reader)],
    routes: [{ router: fileRoutes(files, log) }],
    prune: [{ what: 'expired files', run: (now) => files.prune(now) }],
  };
}
