import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { PLATFORMS, PLATFORM_NAMES } from '../src/platforms/platforms.js';
import { isSandboxMode } from '../src/platforms/sandboxes.js';
import { startSandboxes, type Sandboxes } from '../src/sandbox-mode.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Sandbox mode starts every platform's sandbox the same way: through the `sandbox` hook of its
 * plugin (src/platforms/plugin.ts), in one loop (src/sandbox-mode.ts) that names no platform. Which
 * platforms are left to a sandbox is the plugins' say (src/platforms/sandboxes.ts), and every
 * configuration decides what it decided when sandbox mode meant "no DISCORD_TOKEN" in config.ts.
 */
describe('sandbox mode, through the platforms’ hooks', () => {
  let folder: string | undefined;
  let sandboxes: Sandboxes | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await sandboxes?.close();
    sandboxes = undefined;
    if (folder !== undefined) await rm(folder, { recursive: true, force: true });
    folder = undefined;
  });

  it('starts each platform that has a sandbox through its hook, once, in the one loop, and gives Herald its settings', async () => {
    const withSandbox = PLATFORMS.filter((p) => p.sandbox !== undefined);
    // Slack's and Discord's today; a platform that adds one joins this walk with no edit here.
    expect(withSandbox.map((p) => p.name)).toEqual(expect.arrayContaining(['discord', 'slack']));
    const starts = withSandbox.map((p) => vi.spyOn(p.sandbox as NonNullable<typeof p.sandbox>, 'start'));
    folder = await mkdtemp(path.join(tmpdir(), 'herald-sandbox-hooks-'));
    // A bare start: no platform is given settings of its own.
    const config = loadConfig({ PORT: '0', HERALD_SANDBOX_PORT: '0', HERALD_DATA_DIR: folder });
    expect(config.sandboxed).toEqual(withSandbox.map((p) => p.name));
    expect(isSandboxMode(config)).toBe(true);
    sandboxes = await startSandboxes(config);
    expect(sandboxes.started.map((s) => s.name)).toEqual(withSandbox.map((p) => p.name));
    for (const [i, start] of starts.entries()) {
      expect(start, withSandbox[i]?.name).toHaveBeenCalledTimes(1);
      // Each is given the settings the environment set for its platform, to complete.
      expect(start.mock.calls[0]?.[0]).toMatchObject({ dataDir: folder, host: config.host, settings: config.platforms[withSandbox[i]?.name ?? ''] });
    }
    for (const { name, sandbox } of sandboxes.started) {
      // Herald speaks to the sandbox as to the platform; the page a person opens answers.
      expect(sandboxes.config.platforms[name]).toBe(sandbox.config);
      expect((await fetch(sandbox.page ?? sandbox.url)).status, name).toBe(200);
    }
    // The first sandbox's links and media are Herald's to show (Discord's: its messages' links).
    expect(sandboxes.site.messageLinkBase).toBe(sandboxes.started[0]?.sandbox.url);
  });

  it('decides sandbox mode for each configuration as before: the default home without settings, and the home left to its sandbox', () => {
    const decided = (env: Record<string, string>): { sandboxed: readonly string[]; mode: boolean } => {
      const config = loadConfig(env);
      return { sandboxed: config.sandboxed, mode: isSandboxMode(config) };
    };
    expect(decided({})).toEqual({ sandboxed: ['discord', 'slack'], mode: true });
    expect(decided({ SLACK_BOT_TOKEN: 'xoxb-1' })).toEqual({ sandboxed: ['discord'], mode: true });
    expect(decided({ DISCORD_TOKEN: 'x' })).toEqual({ sandboxed: [], mode: false });
    expect(decided({ HERALD_TRANSPORT: 'slack' })).toEqual({ sandboxed: ['slack'], mode: true });
    expect(decided({ HERALD_TRANSPORT: 'slack', SLACK_BOT_TOKEN: 'xoxb-1' })).toEqual({ sandboxed: [], mode: false });
    expect(decided({ HERALD_TRANSPORT: 'memory' })).toEqual({ sandboxed: ['slack'], mode: false });
    const refused = (env: Record<string, string>): string[] => {
      try {
        loadConfig(env);
        return [];
      } catch (err) {
        return err instanceof ConfigError ? [...err.problems] : [String(err)];
      }
    };
    // A token for the default home turns sandbox mode off, so a home left without settings is refused.
    expect(refused({ DISCORD_TOKEN: 'x', HERALD_TRANSPORT: 'slack' })).toEqual(['HERALD_TRANSPORT is slack but SLACK_BOT_TOKEN is unset', 'HERALD_CHAT_TRANSPORT is slack but SLACK_BOT_TOKEN is unset']);
    expect(refused({ DISCORD_TOKEN: 'x', HERALD_CHAT_TRANSPORT: 'slack' })).toEqual(['HERALD_CHAT_TRANSPORT is slack but SLACK_BOT_TOKEN is unset']);
    expect(refused({ HERALD_TRANSPORT: 'memory', HERALD_CHAT_TRANSPORT: 'discord' })).toEqual(['HERALD_CHAT_TRANSPORT is discord but HERALD_TRANSPORT is not discord and DISCORD_TOKEN is unset']);
  });

  it('names no platform where sandbox mode is wired: the loop, and the serve command with its banner', async () => {
    const names = new RegExp(`\\b(${PLATFORM_NAMES.join('|')})\\b|${PLATFORM_NAMES.map((n) => `${n[0]?.toUpperCase()}${n.slice(1)}`).join('|')}|DISCORD_|SLACK_|sandbox/sandbox`);
    const loop = await readFile(path.join(ROOT, 'src/sandbox-mode.ts'), 'utf8');
    expect(loop.match(names)).toBeNull();
    const cli = await readFile(path.join(ROOT, 'src/cli.ts'), 'utf8');
    // From the serve command to the banner's end: the part of cli.ts sandbox mode runs through.
    const serve = cli.slice(cli.indexOf("case 'serve':"), cli.indexOf('function waitForSignal'));
    expect(serve.length).toBeGreaterThan(1_000);
    expect(serve.match(names)).toBeNull();
    // No platform's sandbox is loaded anywhere but through its plugin.
    expect(cli).not.toMatch(/platforms\/[a-z]+\/(sandbox|[a-z-]*sandbox-mode)/);
  });
});
