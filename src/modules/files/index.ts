import { defineModule } from '../contract.js';
import type { FileStore } from './files.service.js';
import { fileTools } from './files.tools.js';

export type { FileStore } from './files.service.js';

/**
 * Files out and in (issue 25): uploads stored by their SHA-256 (`POST /mcp/files`) that posts and
 * DMs attach, and a readable message's attachment fetched into the same store (`download_attachment`).
 */
export const filesModule = defineModule<{ files: FileStore }>({
  name: 'files',
  migrations: ['2026-12-02T12-10-00_files', '2026-12-06T07-50-00_file-uploads'],
  tools: fileTools,
  start: async (services) => (await import('./files.module.js')).startFiles(services),
});
