import type { EnvReader } from '../../infra/env.js';

/** The inbound inbox's retention and its operator's webhook, read by this module (src/modules/contract.ts `config`). */
export interface InboxSettings {
  /** `HERALD_INBOX_RETENTION_DAYS`: heard events older than this are dropped. Default 30. */
  readonly retentionDays: number;
  /** `HERALD_INBOX_MAX_PER_CHANNEL`: at most this many heard events kept per channel (the oldest dropped first). Default 10000. */
  readonly maxPerChannel: number;
  /** `HERALD_INBOX_WEBHOOK_URL`: where each heard event is POSTed, signed (operator only; unset: no push). */
  readonly webhookUrl: string | undefined;
  /** `HERALD_INBOX_WEBHOOK_SECRET`: the HMAC-SHA256 key the pushes are signed with (at least 43 base64url characters; required with the URL). */
  readonly webhookSecret: string | undefined;
  /** `HERALD_INBOX_WEBHOOK_GIVE_UP_SECONDS`: a push still failing this long after the event was heard is given up (the event stays in the inbox). Default 86400. */
  readonly webhookGiveUpSeconds: number;
}

export function readInboxSettings(read: EnvReader): InboxSettings {
  const settings = Object.freeze({
    retentionDays: read.int('HERALD_INBOX_RETENTION_DAYS', 30, 1, 3_650),
    maxPerChannel: read.int('HERALD_INBOX_MAX_PER_CHANNEL', 10_000, 1, 10_000_000),
    webhookUrl: read.url('HERALD_INBOX_WEBHOOK_URL'),
    webhookSecret: read.token('HERALD_INBOX_WEBHOOK_SECRET'),
    webhookGiveUpSeconds: read.int('HERALD_INBOX_WEBHOOK_GIVE_UP_SECONDS', 86_400, 1, 30 * 86_400),
  });
  if ((settings.webhookUrl === undefined) !== (settings.webhookSecret === undefined)) read.problem('HERALD_INBOX_WEBHOOK_URL and HERALD_INBOX_WEBHOOK_SECRET go together: set both, or neither');
  return settings;
}
