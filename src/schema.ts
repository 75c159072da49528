import type { ArchiveActionTable, MediaBlobTable, MediaItemTable, MediaReservationTable, MediaScrapeTable, MediaStorageTable } from './modules/archive/archive.table.js';
import type { CommandRunTable, CommandSourceTable } from './modules/commands/command-run.table.js';
import type { DeliveryTable, SentMessageTable } from './modules/deliveries/delivery.table.js';
import type { DestinationTable } from './modules/destinations/destination.table.js';
import type { HandoffEventTable, HandoffInboxTable } from './modules/handoffs/handoff.table.js';
import type { PairingCodeTable, RegistrationTable } from './modules/identity/identity.table.js';
import type { IrcChannelTable, IrcLineTable } from './transports/irc/irc-line.table.js';

/**
 * Herald's database: every module's tables, assembled here at the wiring level so the platform's
 * store knows no tables and each module owns its own (migrations in migrations/).
 */
export interface Database {
  deliveries: DeliveryTable;
  sent_messages: SentMessageTable;
  destinations: DestinationTable;
  registrations: RegistrationTable;
  pairing_codes: PairingCodeTable;
  command_runs: CommandRunTable;
  command_sources: CommandSourceTable;
  handoff_events: HandoffEventTable;
  handoff_inbox: HandoffInboxTable;
  media_scrapes: MediaScrapeTable;
  media_items: MediaItemTable;
  media_blobs: MediaBlobTable;
  media_storage: MediaStorageTable;
  media_reservations: MediaReservationTable;
  archive_actions: ArchiveActionTable;
  irc_lines: IrcLineTable;
  irc_channels: IrcChannelTable;
}
