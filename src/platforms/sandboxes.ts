import { DEFAULT_HOME, PLATFORMS } from './platforms.js';
import type { PlatformPlugin } from './plugin.js';

// Sandbox mode, decided from the platforms' own settings: what a bare `npm start` runs. It is on
// when the default home platform (HERALD_TRANSPORT's default) is given no settings of its own and
// the home platform is left to its sandbox; then every platform left to its sandbox gets one
// (src/platforms/plugin.ts, `SandboxHook`), and nothing outside the process is needed.

/** Whether the environment's settings (undefined: none) leave a platform to its sandbox. */
function leftToSandbox(plugin: PlatformPlugin, settings: unknown): boolean {
  const hook = plugin.sandbox;
  if (hook === undefined) return false;
  return hook.needed !== undefined ? hook.needed(settings) : settings === undefined;
}

/**
 * The platforms sandbox mode would run on sandboxes, in registry order: none when the default home
 * platform was given settings of its own (for Discord, a DISCORD_TOKEN).
 */
export function sandboxedPlatforms(platforms: Readonly<Record<string, unknown>>, list: readonly PlatformPlugin[] = PLATFORMS): string[] {
  const home = list.find((p) => p.name === DEFAULT_HOME);
  const settings = platforms[DEFAULT_HOME];
  if (home === undefined || (settings !== undefined && !leftToSandbox(home, settings))) return [];
  return list.filter((p) => leftToSandbox(p, platforms[p.name])).map((p) => p.name);
}

/** True when Herald runs on its sandboxes: its home platform is one of them. */
export function isSandboxMode(config: { readonly transport: string; readonly sandboxed: readonly string[] }): boolean {
  return config.sandboxed.includes(config.transport);
}

/** Why Herald is in sandbox mode (the setting the default home platform misses), for messages that refuse it. */
export function sandboxReason(): string {
  return PLATFORMS.find((p) => p.name === DEFAULT_HOME)?.sandbox?.reason ?? `${DEFAULT_HOME} has no settings`;
}
