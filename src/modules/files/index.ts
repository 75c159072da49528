import { deliveriesModule } from '../deliveries/index.js';
import { destinationsModule } from '../destinations/index.js';
import { identityModule } from '../identity/index.js';
import { defineModule, ownTables } from '../contract.js';
import { readFileStoreLimits, type FileStoreLimits } from './settings.js';
import type { FilesDb } from './files.table.js';
import type { FileStore } from './files.service.js';
import { fileTools } from './files.tools.js';

export type { FileStore } from './files.service.js';

/**
 * Files out and in (issue 25): uploads stored by their SHA-256 (`POST /mcp/files`) that posts and
 * DMs attach, and a readable message's attachment fetched into the same store (`download_attachment`).
 */
export const filesModule = defineModule<{ files: FileStore }, undefined, FileStoreLimits, FilesDb>({
  name: 'files',
  needs: { modules: [deliveriesModule, destinationsModule, identityModule] },
  answers: ['checkAttachments', 'attachmentBytes'],
  tables: ownTables<FilesDb>(),
  config: readFileStoreLimits,
  tools: fileTools,
  start: async (services) => (await import('./files.module.js')).startFiles(services),
});
