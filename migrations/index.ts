import type { Migration } from 'kysely';
import * as bridgeCore from './2026-11-29T19-30-00_bridge-core.js';
import * as identity from './2026-11-29T20-00-00_identity.js';
import * as inDoubt from './2026-11-30T04-00-00_in-doubt.js';
import * as addresses from './2026-11-30T05-00-00_addresses.js';
import * as rateBudget from './2026-11-30T06-00-00_rate-budget.js';
import * as outboxHealth from './2026-11-30T06-30-00_outbox-health.js';
import * as commandRuns from './2026-11-30T07-00-00_command-runs.js';
import * as replyKind from './2026-11-30T08-30-00_reply-kind.js';
import * as handoffs from './2026-11-30T09-10-00_handoffs.js';
import * as media from './2026-11-30T09-20-00_media.js';
import * as irc from './2026-11-30T09-00-00_irc.js';
import * as archiveActionLog from './2026-12-01T09-00-00_archive-action-log.js';
import * as archiveNames from './2026-12-01T09-10-00_archive-names.js';
import * as commandSources from './2026-12-01T10-00-00_command-sources.js';
import * as mediaStorage from './2026-12-01T22-30-00_media-storage.js';
import * as chatKind from './2026-12-02T03-00-00_chat-kind.js';
import * as messageOpsKinds from './2026-12-02T12-20-00_message-ops-kinds.js';
import * as singletons from './2026-12-02T05-00-00_singletons.js';
import * as registrationPlatform from './2026-12-02T05-30-00_registration-platform.js';
import * as handoffCatchup from './2026-12-02T08-30-00_handoff-catchup.js';
import * as files from './2026-12-02T12-10-00_files.js';
import * as inbox from './2026-12-02T12-30-00_inbox.js';
import * as policyUsage from './2026-12-02T12-40-00_policy-usage.js';
import * as policyConfirmations from './2026-12-06T07-40-00_policy-confirmations.js';
import * as fileUploads from './2026-12-06T07-50-00_file-uploads.js';
import * as scrapeRequests from './2026-12-06T08-40-00_scrape-requests.js';

/** Every migration, by name; names sort in the order they apply. Add new ones here. */
export const migrations: Record<string, Migration> = {
  '2026-11-29T19-30-00_bridge-core': bridgeCore,
  '2026-11-29T20-00-00_identity': identity,
  '2026-11-30T04-00-00_in-doubt': inDoubt,
  '2026-11-30T05-00-00_addresses': addresses,
  '2026-11-30T06-00-00_rate-budget': rateBudget,
  '2026-11-30T06-30-00_outbox-health': outboxHealth,
  '2026-11-30T07-00-00_command-runs': commandRuns,
  '2026-11-30T08-30-00_reply-kind': replyKind,
  '2026-11-30T09-10-00_handoffs': handoffs,
  '2026-11-30T09-20-00_media': media,
  '2026-11-30T09-00-00_irc': irc,
  '2026-12-01T09-00-00_archive-action-log': archiveActionLog,
  '2026-12-01T09-10-00_archive-names': archiveNames,
  '2026-12-01T10-00-00_command-sources': commandSources,
  '2026-12-01T22-30-00_media-storage': mediaStorage,
  '2026-12-02T03-00-00_chat-kind': chatKind,
  '2026-12-02T05-00-00_singletons': singletons,
  '2026-12-02T05-30-00_registration-platform': registrationPlatform,
  '2026-12-02T08-30-00_handoff-catchup': handoffCatchup,
  '2026-12-02T12-10-00_files': files,
  '2026-12-02T12-20-00_message-ops-kinds': messageOpsKinds,
  '2026-12-02T12-30-00_inbox': inbox,
  '2026-12-02T12-40-00_policy-usage': policyUsage,
  '2026-12-06T07-40-00_policy-confirmations': policyConfirmations,
  '2026-12-06T07-50-00_file-uploads': fileUploads,
  '2026-12-06T08-40-00_scrape-requests': scrapeRequests,
};
