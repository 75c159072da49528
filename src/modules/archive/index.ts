import { defineModule, ownTables } from '../contract.js';
import { readMediaLimits, type MediaLimits } from './settings.js';
import type { ArchiveDb } from './archive.table.js';
import { archiveTools } from './archive.tools.js';
import type { MediaService } from './media.service.js';

export type { MediaService } from './media.service.js';
// Files in (the files module) fetch through the same downloader into the same layout.
export { DISCORD_MEDIA_HOSTS, MediaDownloader } from './media.downloader.js';
export { blobRelativePath } from './media.js';

/** The media archive: scrapes of a channel's history, stored media, its web UI (`/ui/archive`). */
export const archiveModule = defineModule<{ media: MediaService }, undefined, MediaLimits, ArchiveDb>({
  name: 'archive',
  tables: ownTables<ArchiveDb>(),
  config: readMediaLimits,
  tools: archiveTools,
  commands: async () => [(await import('./media.command.js')).mediaCommand],
  start: async (services) => (await import('./archive.module.js')).startArchive(services),
});
