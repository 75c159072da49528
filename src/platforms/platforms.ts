import { discord } from './discord/index.js';
import { irc } from './irc/index.js';
import { memory } from './memory/index.js';
import { slack } from './slack/index.js';
import type { PlatformPlugin } from './plugin.js';

/**
 * Every platform Herald can speak, one line each. A platform is a folder of src/platforms/ whose
 * index.ts exports its plugin (src/platforms/plugin.ts); HERALD_TRANSPORT and
 * HERALD_CHAT_TRANSPORT take their values from this list.
 */
export const PLATFORMS: readonly PlatformPlugin[] = [discord, irc, memory, slack];

/** The platform Herald is home on when HERALD_TRANSPORT is unset; without settings of its own, sandbox mode. */
export const DEFAULT_HOME = 'discord';

/** The platforms' names, in the list's order. */
export const PLATFORM_NAMES: readonly string[] = PLATFORMS.map((t) => t.name);
