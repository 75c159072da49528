import type { ArchiveDb } from './modules/archive/archive.table.js';
import type { CommandsDb } from './modules/commands/command-run.table.js';
import type { DeliveriesDb } from './modules/deliveries/delivery.table.js';
import type { DestinationsDb } from './modules/destinations/destination.table.js';
import type { HandoffsDb } from './modules/handoffs/handoff.table.js';
import type { IdentityDb } from './modules/identity/identity.table.js';
import type { FilesDb } from './modules/files/files.table.js';
import type { InboxDb } from './modules/inbox/inbox.table.js';
import type { IrcDb } from './transports/irc/irc-line.table.js';

/**
 * Herald's whole database, assembled at the wiring level from each part's own tables (each
 * module and platform sees only its own, through `tablesOf`; migrations in migrations/). Tests and
 * the wiring read it whole.
 */
export type Database = DeliveriesDb & DestinationsDb & IdentityDb & CommandsDb & HandoffsDb & ArchiveDb & IrcDb & FilesDb & InboxDb;
