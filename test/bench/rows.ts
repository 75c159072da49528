import { createHash, randomBytes } from 'node:crypto';

/** Realistic delivery requests for `npm run bench`: distinct ids, a card, a link, ~200 characters. */
export function deliveryRequest(guildId: string, destination: string, requestId = randomBytes(32).toString('hex')): Record<string, unknown> {
  return {
    request_id: requestId,
    kind: 'post',
    target: { guild_id: guildId, destination },
    body: {
      content: `Disk usage above 90% on db-${requestId.slice(0, 4)}: 91.3% of /var/lib/postgresql used, growing 2.1 GB/h; next check in 5 minutes.`,
      card: { title: `db-${requestId.slice(0, 4)}`, description: 'Consider vacuuming or extending the volume.', color: 15158332 },
      links: [{ label: 'Runbook', url: 'https://example.com/runbook/disk' }],
    },
  };
}

/** The single-row INSERT Herald's accept performs, as plain SQL: the baselines run exactly this. */
export const INSERT_SQL = `insert into deliveries (request_id, kind, target, body, payload_hash, status, failure_code, created_at, next_attempt_at)
  values ($1, $2, $3, $4, $5, 'pending', null, $6, $6) on conflict (request_id) do nothing`;

export function insertParams(d: Record<string, unknown>): unknown[] {
  const now = new Date();
  const hash = createHash('sha256').update(JSON.stringify([d['kind'], d['target'], d['body']])).digest('hex');
  return [d['request_id'], d['kind'], JSON.stringify(d['target']), JSON.stringify(d['body']), hash, now];
}
