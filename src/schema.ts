import type { TablesOf } from './modules/contract.js';
import type { MODULES } from './modules/modules.js';
import type { IrcDb } from './platforms/irc/irc-line.table.js';

/**
 * Herald's whole database, assembled from each part's own tables: every module of
 * src/modules/modules.ts declares its own (`tables: ownTables<...>()`), and the platforms' (IrcDb).
 * Each module and platform sees only its own, through `tablesOf` (src/infra/db/tables.ts); tests
 * and the wiring read it whole. Nothing to edit here when a module is added.
 */
export type Database = TablesOf<typeof MODULES> & IrcDb;
