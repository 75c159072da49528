import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { COMMAND_HELP, USAGE } from '../src/cli-help.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { knownVariables, unknownVariables } from '../src/config-variables.js';
import { FailureThrottle } from '../src/infra/http/auth.js';
import { runHerald } from './support/process.js';
import type { CommandLimits } from '../src/modules/commands/settings.js';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8787);
    expect(c.host).toBe('127.0.0.1');
    expect(c.bridgeToken).toBeUndefined();
    expect(c.databaseUrl).toBeUndefined();
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('serves metrics on their own loopback port: PORT+2 by default, a free one with PORT=0, none when off', () => {
    expect(loadConfig({})).toMatchObject({ metricsPort: 8789, metricsHost: '127.0.0.1' });
    expect(loadConfig({ PORT: '9000' }).metricsPort).toBe(9002);
    expect(loadConfig({ PORT: '0' }).metricsPort).toBe(0);
    expect(loadConfig({ HERALD_METRICS_PORT: '9100', HERALD_METRICS_HOST: '0.0.0.0' })).toMatchObject({ metricsPort: 9100, metricsHost: '0.0.0.0' });
    expect(loadConfig({ HERALD_METRICS_PORT: 'off' }).metricsPort).toBeUndefined();
    expect(() => loadConfig({ HERALD_METRICS_PORT: 'on' })).toThrow(/HERALD_METRICS_PORT must be an integer from 0 to 65535/);
  });

  it('handoffs: off with no trusted bot; the trusted list and limits from the environment', () => {
    expect(loadConfig({}).modules['handoffs']).toEqual({ trustedBotIds: [], ttlSeconds: 300, maxExpirySeconds: 3600, maxPayloadBytes: 100_000, replayCapacity: 4096, rateLimit: 10, rateWindowSeconds: 60 });
    const c = loadConfig({ HERALD_TRUSTED_BOT_IDS: ' 111111111111111112, 111111111111111113,111111111111111112 ', HERALD_HANDOFF_RATE_LIMIT: '3', HERALD_HANDOFF_REPLAY_CAPACITY: '50' });
    expect(c.modules['handoffs']).toMatchObject({ trustedBotIds: ['111111111111111112', '111111111111111113'], rateLimit: 3, replayCapacity: 50 });
    expect(() => loadConfig({ HERALD_TRUSTED_BOT_IDS: '111111111111111112,helper' })).toThrow(/HERALD_TRUSTED_BOT_IDS must be comma-separated Discord user ids \(got helper\)/);
    expect(() => loadConfig({ HERALD_HANDOFF_TTL_SECONDS: '3601' })).toThrow(/HERALD_HANDOFF_TTL_SECONDS must be an integer from 1 to 3600/);
  });

  it('bounds how old a command\'s source message may be: 5 minutes by default, at most an hour', () => {
    expect((loadConfig({}).modules['commands'] as CommandLimits).sourceMaxAgeSeconds).toBe(300);
    expect((loadConfig({ HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS: '60' }).modules['commands'] as CommandLimits).sourceMaxAgeSeconds).toBe(60);
    for (const bad of ['0', '3601', '86400', '5m']) {
      expect(() => loadConfig({ HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS: bad }), bad).toThrow(/HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS must be an integer from 1 to 3600/);
    }
  });

  it('reports every problem at once', () => {
    try {
      loadConfig({ MCP_BRIDGE_TOKEN: 'short', HERALD_ADMIN_TOKEN: 'x'.repeat(42), PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems;
      expect(problems).toHaveLength(5);
      expect(problems.join('\n')).toMatch(/MCP_BRIDGE_TOKEN is too weak/);
      expect(problems.join('\n')).toMatch(/HERALD_ADMIN_TOKEN is too weak/);
    }
  });

  it('refuses tokens that are not at least 43 base64url characters', () => {
    for (const weak of ['a'.repeat(42), `${'a'.repeat(42)}=`, `${'a'.repeat(42)}+`, `${'a'.repeat(50)} `]) {
      expect(() => loadConfig({ MCP_BRIDGE_TOKEN: weak }), weak).toThrow(/MCP_BRIDGE_TOKEN is too weak/);
    }
    expect(loadConfig({ MCP_BRIDGE_TOKEN: 'a'.repeat(43) }).bridgeToken).toBe('a'.repeat(43));
  });

  it('makes `herald serve` exit non-zero at start-up with a clear message for a weak token, never echoing it', async () => {
    const weak = 'hunter2-is-my-password';
    const proc = runHerald(['serve'], { MCP_BRIDGE_TOKEN: weak, PORT: '0', DISCORD_TOKEN: 'x', HERALD_DATA_DIR: '/nonexistent/never-created' });
    const { code } = await proc.exited;
    expect(code).toBe(2);
    expect(proc.output()).toMatch(/MCP_BRIDGE_TOKEN is too weak: it must be at least 43 base64url characters/);
    expect(proc.output()).not.toContain(weak);
  });
});

describe('variables Herald does not know', () => {
  const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const NAME = /\b(?:(?:HERALD|DISCORD|MCP)_[A-Z0-9_]*[A-Z0-9]|PORT|HOST|DATABASE_URL|LOG_LEVEL)\b/g;

  it('knows every variable config.ts documents, the configuration guide lists, the CLI help names, or the code and tests read', async () => {
    const known = knownVariables();
    // config-types.ts documents Herald's own settings; each platform's and module's folder its own (src/platforms/<name>/index.ts or settings.ts, src/modules/<name>/settings.ts).
    const transports = (await readdir(path.join(ROOT, 'src/platforms'), { recursive: true })).filter((f) => /^[^/]+\/(index|settings)\.ts$/.test(f)).map((f) => `src/platforms/${f}`);
    transports.push(...(await readdir(path.join(ROOT, 'src/modules'), { recursive: true })).filter((f) => /^[^/]+\/(index|settings)\.ts$/.test(f)).map((f) => `src/modules/${f}`));
    const configSource = (await Promise.all(['src/config-types.ts', ...transports].map((f) => readFile(path.join(ROOT, f), 'utf8')))).join('\n');
    const documented = [...configSource.matchAll(/\/\*\*\s*(?:\*\s*)?`([A-Z][A-Z0-9_]+)`:/g)].map((m) => m[1]);
    expect(documented.length).toBeGreaterThan(50);
    const guide = await readFile(path.join(ROOT, 'docs/guides/configuration.md'), 'utf8');
    const listed = [...guide.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(listed.length).toBeGreaterThan(50);
    const inHelp = [USAGE, ...Object.values(COMMAND_HELP)].flatMap((text) => text.match(NAME) ?? []);
    // In the code and the tests: a quoted name with Herald's prefixes, or a read of process.env.
    const quoted: string[] = [];
    for (const dir of ['src', 'test', 'bin']) {
      for (const file of await readdir(path.join(ROOT, dir), { recursive: true })) {
        // This file misspells names on purpose.
        if (!/\.(ts|js)$/.test(file) || file === 'config.test.ts') continue;
        const code = await readFile(path.join(ROOT, dir, file), 'utf8');
        for (const m of code.matchAll(/['"`]((?:HERALD|DISCORD|MCP)_[A-Z0-9_]+)['"`]|process\.env(?:\.|\[')([A-Z][A-Z0-9_]+)/g)) quoted.push(`${file}: ${m[1] ?? m[2]}`);
      }
    }
    expect(quoted.length).toBeGreaterThan(50);
    const elsewhere = ['TEST_DATABASE_URL', 'TEST_LOG_LEVEL', 'PG_BIN', 'CHROMIUM_PATH', 'BENCH_MODE', 'BENCH_POOL', 'BENCH_DATA_DIR', 'BENCH_MEDIA_ORIGIN', 'BENCH_HEAR_ENV', 'BENCH_IRC_DEBUG', 'CHAOS_MEDIA_ORIGINS', 'LOCK_DIR', 'PATH', 'HOME', 'TMPDIR', 'VITEST'];
    expect(quoted.filter((q) => { const name = q.split(': ')[1] ?? ''; return !known.includes(name) && !elsewhere.includes(name); })).toEqual([]);
    expect([...documented, ...listed, ...inHelp].filter((name) => name === undefined || !known.includes(name))).toEqual([]);
    // And the other way round: every variable Herald reads is documented in both places (but the test harness's own).
    expect(known.filter((name) => !documented.includes(name) || !listed.includes(name))).toEqual(['HERALD_TEST_RUN_DIR']);
  });

  it('names each unknown HERALD_/DISCORD_/MCP_ variable, with the closest known name when one is close', () => {
    expect(
      unknownVariables({
        HERALD_COMAND_EXECUTION_ENABLED: 'true',
        HERALD_METRIC_PORT: '9100',
        HERALD_IRC_CHANNEL: '#agents',
        HERALD_DATABASE_URL: 'postgres://x',
        HERALD_PORT: '9000',
        DISCORD_BOT_TOKEN: 'secret',
        MCP_TOKEN: 'secret',
        HERALD_COMMAND_EXECUTION_ENABLED: 'true',
        PATH: '/bin',
        PORTS: '1',
      }),
    ).toEqual([
      { name: 'DISCORD_BOT_TOKEN', suggestion: 'DISCORD_TOKEN' },
      { name: 'HERALD_COMAND_EXECUTION_ENABLED', suggestion: 'HERALD_COMMAND_EXECUTION_ENABLED' },
      { name: 'HERALD_DATABASE_URL', suggestion: 'DATABASE_URL' },
      { name: 'HERALD_IRC_CHANNEL', suggestion: 'HERALD_IRC_CHANNELS' },
      { name: 'HERALD_METRIC_PORT', suggestion: 'HERALD_METRICS_PORT' },
      { name: 'HERALD_PORT', suggestion: 'PORT' },
      { name: 'MCP_TOKEN', suggestion: undefined },
    ]);
    expect(unknownVariables({ HERALD_COMMAND_EXECUTION_ENABLED: 'true', DISCORD_TOKEN: 'x', MCP_BRIDGE_TOKEN: 'y' })).toEqual([]);
  });

  it('warns at start-up, naming the closest known variable and never a value, even beside a configuration error', async () => {
    const weak = 'hunter2-is-my-password';
    const proc = runHerald(['serve'], { HERALD_COMAND_EXECUTION_ENABLED: 'true', DISCORD_BOT_TOKEN: weak, MCP_BRIDGE_TOKEN: weak, PORT: '0' }, { built: true });
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toContain('herald: warning: HERALD_COMAND_EXECUTION_ENABLED is not a Herald variable and is ignored: did you mean HERALD_COMMAND_EXECUTION_ENABLED?\n');
    expect(proc.output()).toContain('herald: warning: DISCORD_BOT_TOKEN is not a Herald variable and is ignored: did you mean DISCORD_TOKEN?\n');
    expect(proc.output()).toContain('MCP_BRIDGE_TOKEN is too weak');
    expect(proc.output()).not.toContain(weak);
  });
});

describe('failed-auth throttle', () => {
  it('keeps its table of addresses bounded', () => {
    let now = 0;
    const t = new FailureThrottle({ maxFailures: 10, windowMs: 60_000, maxAddresses: 100 }, () => now);
    for (let i = 0; i < 10_000; i++) {
      now += 1;
      t.fail(`10.0.${i >> 8}.${i & 255}`);
    }
    expect(t.size).toBeLessThanOrEqual(100);
  });

  it('forgets failures after the window', () => {
    let now = 0;
    const t = new FailureThrottle({ maxFailures: 10, windowMs: 60_000, maxAddresses: 100 }, () => now);
    for (let i = 0; i < 10; i++) expect(t.fail('a').limited).toBe(false);
    expect(t.fail('a')).toEqual({ limited: true, retryAfterSeconds: 60 });
    now = 30_500;
    expect(t.fail('a')).toEqual({ limited: true, retryAfterSeconds: 30 });
    now = 60_000;
    expect(t.fail('a').limited).toBe(false);
  });
});

describe('IRC configuration', () => {
  it('is off without HERALD_IRC_URL; the chat tools then default to Discord', () => {
    const c = loadConfig({});
    expect(c.platforms['irc']).toBeUndefined();
    expect(c.chatTransport).toBe('discord');
  });

  it('has the documented defaults, and chat defaults to IRC when it is set', () => {
    const c = loadConfig({ HERALD_IRC_URL: 'ircs://irc.example.org:6697', HERALD_IRC_CHANNELS: '#agents, ops' });
    expect(c.platforms['irc']).toEqual({
      url: 'ircs://irc.example.org:6697',
      nick: 'herald',
      password: undefined,
      channels: ['#agents', 'ops'],
      linesPerSecond: 4,
      echoTimeoutMs: 10_000,
      senderIdleMs: 300_000,
      retentionDays: 8,
      retentionLines: 10_000,
    });
    expect(c.chatTransport).toBe('irc');
  });

  it('reports bad IRC settings all at once', () => {
    expect(() => loadConfig({ HERALD_IRC_URL: 'http://irc.example.org', HERALD_IRC_NICK: '9lives', HERALD_IRC_CHANNELS: 'a b', HERALD_IRC_LINES_PER_SECOND: '0' })).toThrow(
      /HERALD_IRC_URL must be irc:\/\/host:port[\s\S]*HERALD_IRC_NICK must be an IRC nick[\s\S]*HERALD_IRC_CHANNELS[\s\S]*HERALD_IRC_LINES_PER_SECOND/,
    );
    expect(() => loadConfig({ HERALD_CHAT_TRANSPORT: 'irc' })).toThrow('HERALD_CHAT_TRANSPORT is irc but HERALD_IRC_URL is unset');
    expect(() => loadConfig({ HERALD_DISCORD_CHAT_GUILD: 'general' })).toThrow('HERALD_DISCORD_CHAT_GUILD must be a guild id');
  });
});
