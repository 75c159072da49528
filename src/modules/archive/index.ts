import { defineModule } from '../contract.js';
import { archiveTools } from './archive.tools.js';
import type { MediaService } from './media.service.js';

export type { MediaService } from './media.service.js';
// Files in (the files module) fetch through the same downloader into the same layout.
export { DISCORD_MEDIA_HOSTS, MediaDownloader } from './media.downloader.js';
export { blobRelativePath } from './media.js';

/** The media archive: scrapes of a channel's history, stored media, its web UI (`/ui/archive`). */
export const archiveModule = defineModule<{ media: MediaService }>({
  name: 'archive',
  migrations: ['2026-11-30T09-20-00_media', '2026-12-01T09-00-00_archive-action-log', '2026-12-01T09-10-00_archive-names', '2026-12-01T22-30-00_media-storage'],
  tools: archiveTools,
  commands: async () => [(await import('./media.command.js')).mediaCommand],
  start: async (services) => (await import('./archive.module.js')).startArchive(services),
});
