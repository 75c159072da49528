import { discord } from './discord/index.js';
import { irc } from './irc/index.js';
import { memory } from './memory/index.js';
import { slack } from './slack/index.js';
import type { TransportPlugin } from './plugin.js';

/**
 * Every platform Herald can speak, one line each. A platform is a folder of src/transports/ whose
 * index.ts exports its plugin (src/transports/plugin.ts); HERALD_TRANSPORT and
 * HERALD_CHAT_TRANSPORT take their values from this list.
 */
export const TRANSPORTS: readonly TransportPlugin[] = [discord, irc, memory, slack];

/** The platforms' names, in the list's order. */
export const TRANSPORT_NAMES: readonly string[] = TRANSPORTS.map((t) => t.name);
