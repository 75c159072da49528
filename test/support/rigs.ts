import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { SLACK_SANDBOX_IDS, SlackSandbox, type SlackSandboxOptions } from '../../src/platforms/slack/sandbox/sandbox.js';
import { DiscordSandbox, type SandboxOptions } from '../../src/platforms/discord/sandbox/sandbox.js';
import { testDatabase, type TestDatabase } from './db.js';
import { heraldEnv, IDS, newToken, startTestHerald, type TestHerald } from './herald.js';
import { processHarness, type FinishedTest, type HeraldProcess, type ProcessHarness } from './process.js';

// The tests on these rigs take the Discord sandbox from here, so they do not name its module.
export { DiscordSandbox, SANDBOX_MEDIA_CHANNEL } from '../../src/platforms/discord/sandbox/sandbox.js';

/**
 * The fixtures of the tests that run real Herald processes against the sandboxes (crash, failover,
 * restart) and of those that run a Herald beside the Slack sandbox. Called inside a `describe`,
 * each registers its own hooks and closes everything it opened after each test or after the
 * block, whatever the test did: a test that failed or timed out leaves no process, sandbox or
 * database behind (its processes are killed and their output printed, see process.ts).
 */

export interface CrashRigOptions {
  /** The Discord sandbox's options (e.g. `{ mediaMessages: 0 }`). */
  sandbox?: SandboxOptions;
  /** Added to every Herald's environment (heraldEnv's defaults); a start's own `extra` wins. */
  env?: Record<string, string>;
  /** Run after each test's processes are stopped and before its databases are dropped. */
  afterProcesses?: () => Promise<unknown>;
}

export interface CrashRig {
  /** The Discord sandbox: started before the block's first test, its faults cleared after each. */
  sandbox: DiscordSandbox;
  /** The Herald processes of the current test: SIGKILLed after it (see processHarness). */
  procs: ProcessHarness;
  bridgeToken: string;
  adminToken: string;
  /** A fresh database for the current test (the one `env` uses from now on), dropped after it. */
  database(): Promise<TestDatabase>;
  /** A Herald's environment on the sandbox and the current test's database (heraldEnv). */
  env(extra?: Record<string, string>): Record<string, string>;
  /** Start `herald <args>` (serve by default) on `env(extra)`, kept by `procs`. */
  start(args?: string[], extra?: Record<string, string>): Promise<HeraldProcess>;
  /**
   * A second Discord with the same bot that forgets nonces at once, started now and closed after
   * the test, with `pastWindow`: what a Herald needs to talk to it and not trust its nonces (no
   * gateway, so no nonce report either: the channel's history is what settles a send).
   */
  forgetfulDiscord(options?: SandboxOptions): Promise<{ discord: DiscordSandbox; pastWindow: Record<string, string> }>;
}

/** Run every step, in order, even when one fails; then throw the first failure. */
async function settleInOrder(steps: (() => unknown)[]): Promise<void> {
  let failure: { err: unknown } | undefined;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      failure ??= { err };
    }
  }
  if (failure !== undefined) throw failure.err;
}

function rigOn(newDatabase: () => Promise<TestDatabase>, options: CrashRigOptions): CrashRig {
  const sandbox = new DiscordSandbox(options.sandbox);
  const procs = processHarness();
  const bridgeToken = newToken();
  const adminToken = newToken();
  /** What the current test opened, closed after it. */
  const databases: TestDatabase[] = [];
  const discords: DiscordSandbox[] = [];

  beforeAll(async () => {
    await sandbox.start();
  });
  afterEach(async (test: FinishedTest) => {
    await settleInOrder([
      () => procs.stopAll(test),
      () => sandbox.clearFaults(),
      ...discords.splice(0).map((d) => () => d.close()),
      ...(options.afterProcesses !== undefined ? [options.afterProcesses] : []),
      ...databases.splice(0).map((db) => () => db.drop()),
    ]);
  });
  afterAll(() => sandbox.close());

  const env = (extra: Record<string, string> = {}): Record<string, string> => {
    const db = databases.at(-1);
    if (db === undefined) throw new Error('no database yet: call database() first in the test');
    return heraldEnv({ sandbox, db, bridgeToken, adminToken }, { ...options.env, ...extra });
  };
  return {
    sandbox,
    procs,
    bridgeToken,
    adminToken,
    async database() {
      const db = await newDatabase();
      databases.push(db);
      return db;
    },
    env,
    start: (args = ['serve'], extra = {}) => procs.start(args, env(extra)),
    async forgetfulDiscord(more = {}) {
      const discord = new DiscordSandbox({ nonceWindowMs: 0, botToken: sandbox.botToken, ...more });
      discords.push(discord);
      await discord.start();
      return { discord, pastWindow: { DISCORD_API_URL: discord.apiUrl, HERALD_NONCE_WINDOW_MS: '0', HERALD_GATEWAY: 'off' } };
    },
  };
}

/**
 * Real Herald processes on a Discord sandbox and a fresh test database per test (test/support/db.ts):
 * the crash and failover tests' rig.
 */
export function crashRig(options: CrashRigOptions = {}): CrashRig {
  return rigOn(() => testDatabase(), options);
}

/** The same rig on databases the test makes itself (e.g. on a PostgreSQL cluster of its own). */
export function crashRigOn(newDatabase: () => Promise<TestDatabase>, options: CrashRigOptions = {}): CrashRig {
  return rigOn(newDatabase, options);
}

export interface SlackRigOptions {
  /** The Slack sandbox's options. */
  slack?: SlackSandboxOptions;
  /** Added to the Herald's environment (after the Slack tokens and URL). */
  env?: Record<string, string>;
  /** A destination of the sandbox guild to map to the Slack workspace's #general once Herald is up. */
  destination?: string;
}

export interface SlackRig {
  /** The Slack sandbox: started before the block's first test, its faults cleared after each. */
  slack: SlackSandbox;
  /** The Herald (startTestHerald: Discord home, Slack beside it), usable from the block's tests and later hooks. */
  h: TestHerald;
}

/**
 * A stand-in for what a `beforeAll` makes, so a block can name it before it exists: each property
 * is read from the value once it is set, and reading one before then says so.
 */
function lateBound<T extends object>(what: string): { value: T; set(v: T | undefined): void } {
  let current: T | undefined;
  const value = new Proxy({} as T, {
    get(_target, key) {
      if (current === undefined) throw new Error(`${what} is not started: use it in a test or in a hook after the rig's`);
      const v: unknown = Reflect.get(current, key);
      return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(current) : v;
    },
  });
  return { value, set: (v) => (current = v) };
}

/** A Slack sandbox and a test Herald using it (its bot and app tokens, its API URL, 3 s timeouts). */
export function slackRig(options: SlackRigOptions = {}): SlackRig {
  const slack = new SlackSandbox(options.slack);
  const herald = lateBound<TestHerald>('the Slack rig\'s Herald');
  /** Kept from the moment it is asked for, so a start that outlives its hook's timeout is closed too. */
  let starting: Promise<TestHerald> | undefined;

  beforeAll(async () => {
    await slack.start(0, '127.0.0.1');
    starting = startTestHerald({
      env: { SLACK_BOT_TOKEN: slack.botToken, SLACK_APP_TOKEN: slack.appToken, SLACK_API_URL: slack.apiUrl, HERALD_SLACK_TIMEOUT_MS: '3000', ...options.env },
    });
    const started = await starting;
    herald.set(started);
    if (options.destination !== undefined) {
      const mapped = await started.admin.put(`/admin/destinations/${IDS.guild}/${options.destination}`, { transport: 'slack', channel: SLACK_SANDBOX_IDS.channels.general });
      expect(mapped.status, mapped.text).toBe(200);
    }
  });
  afterEach(() => slack.faults.clear());
  afterAll(async () => {
    await settleInOrder([() => starting?.then((h) => h.close(), () => undefined), () => slack.close()]);
    herald.set(undefined);
  });
  return { slack, h: herald.value };
}
