import { formatBytes } from '../../infra/bytes.js';
import type { MediaItem } from './api.js';

/** Sizes and times as the operator reads them (sizes as the status page prints them). */
export const bytes = formatBytes;
export const when = (iso: string): string => iso.slice(0, 16).replace('T', ' ');

/** Why an item shows no picture: it was never stored, or what it is can only be downloaded. */
export function reasonOf(item: MediaItem): string {
  switch (item.state) {
    case 'linked':
      return 'not downloaded (links mode)';
    case 'refused':
      return `refused: ${item.error ?? 'no reason given'}`;
    case 'failed':
      return `failed: ${item.error ?? 'no reason given'}`;
    default:
      return `stored${item.contentType !== null ? ` (${item.contentType})` : ''}`;
  }
}
