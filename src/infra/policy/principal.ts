import { createHash } from 'node:crypto';

/**
 * The longest OAuth client id (in UTF-8 bytes) a principal's name keeps as it is. The store keys
 * its per-caller rows (pairings, rate counts, upload totals, inbox cursors) by that name, and an
 * index key has a size limit (about 2.7 kB): a longer id, which an issuer may mint (a client id
 * that is a URL), is named by its SHA-256 instead, so it is still one caller of its own.
 */
export const CLIENT_ID_KEPT_BYTES = 1024;

/**
 * Who is calling, as the policy and an agent's records name it: `connector` without a client id,
 * `client:<id>` for an OAuth client, `client-sha256:<hex>` for one whose id is longer than
 * CLIENT_ID_KEPT_BYTES (no id kept as it is starts so).
 */
export function principalName(client: string | undefined): string {
  if (client === undefined || client === '') return 'connector';
  if (Buffer.byteLength(client) <= CLIENT_ID_KEPT_BYTES) return `client:${client}`;
  return `client-sha256:${createHash('sha256').update(client).digest('hex')}`;
}
