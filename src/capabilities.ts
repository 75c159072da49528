import type { Config } from './config-types.js';
import type { CommandLimits } from './modules/commands/settings.js';
import type { HandoffLimits } from './modules/handoffs/settings.js';
import type { InboxSettings } from './modules/inbox/settings.js';
import type { Platform, Platforms } from './platforms/platform.js';
import { DEFAULT_IDENTITY } from './infra/policy/identity.js';

// What is on: the capabilities an operator turns on with a variable and a restart, as the start
// banner (src/cli.ts) and the status page (src/infra/http/status-page.ts) list them.

/** A capability that is off until the operator sets a variable (and restarts). */
export interface Capability {
  readonly name: string;
  readonly on: boolean;
  /** What it does when on, or how to turn it on when off: the variable to set. */
  readonly detail: string;
}

export function capabilities(config: Config): Capability[] {
  const commands = config.modules['commands'] as CommandLimits | undefined;
  const handoffs = config.modules['handoffs'] as HandoffLimits | undefined;
  const inbox = config.modules['inbox'] as InboxSettings | undefined;
  const trusted = handoffs?.trustedBotIds ?? [];
  const slackSandboxed = config.sandboxed.includes('slack');
  return [
    {
      name: 'command execution',
      on: commands?.executionEnabled === true,
      detail: commands?.executionEnabled === true ? 'run_command executes (HERALD_COMMAND_EXECUTION_ENABLED=true)' : 'run_command only validates; set HERALD_COMMAND_EXECUTION_ENABLED=true to execute',
    },
    {
      name: 'trusted bots (handoffs)',
      on: trusted.length > 0,
      detail: trusted.length > 0 ? `handoffs with ${trusted.length} bot${trusted.length === 1 ? '' : 's'} (HERALD_TRUSTED_BOT_IDS)` : 'set HERALD_TRUSTED_BOT_IDS=<bot user ids> to hand tasks to other bots',
    },
    {
      name: 'IRC',
      on: config.platforms['irc'] !== undefined,
      detail: config.platforms['irc'] !== undefined ? 'connected to HERALD_IRC_URL' : 'set HERALD_IRC_URL=irc://host:6667 (and HERALD_IRC_CHANNELS)',
    },
    {
      name: 'Slack',
      on: config.platforms['slack'] !== undefined,
      detail: slackSandboxed ? 'the local Slack sandbox; set SLACK_BOT_TOKEN for a real workspace' : config.platforms['slack'] !== undefined ? 'SLACK_BOT_TOKEN' : 'set SLACK_BOT_TOKEN (and SLACK_APP_TOKEN for Socket Mode)',
    },
    {
      name: 'inbox webhook',
      on: inbox?.webhookUrl !== undefined,
      detail: inbox?.webhookUrl !== undefined ? 'each heard event is POSTed to HERALD_INBOX_WEBHOOK_URL' : 'set HERALD_INBOX_WEBHOOK_URL and HERALD_INBOX_WEBHOOK_SECRET to push heard events',
    },
  ];
}

/** The banner's lines for them: `  on   IRC  connected to …` / `  off  command execution  run_command only validates; set …`. */
export function capabilityLines(list: readonly Capability[]): string[] {
  const width = Math.max(...list.map((c) => c.name.length));
  return list.map((c) => `  ${(c.on ? 'on' : 'off').padEnd(4)} ${c.name.padEnd(width)}  ${c.detail}`);
}

/** A platform Herald speaks as one of its identities, for the status page: who Herald is there, and what is wrong with its bot. */
export interface PlatformIdentity {
  readonly platform: string;
  /** The identity's name (src/infra/policy/identity.ts): `default`, or an operator's (`ops`). */
  readonly as: string;
  /** The bot's user id (or nick) there, once known; undefined until then. */
  identity(): string | undefined;
  /** What keeps this bot from speaking now (its token refused), as short sentences; none: nothing known. */
  troubles(): readonly string[];
}

/**
 * Who Herald is on each platform, as each of its identities (the default first, then each other
 * identity on the platforms it has a bot on): asked once (in the background, bounded), then kept.
 * A platform that cannot say (no history facet) shows its configured name when it has one (an IRC
 * nick). `troubles` says what is wrong with one identity's bot on one platform.
 */
export function platformIdentities(transports: Platforms, config: Config, troubles: (platform: string, as: string) => readonly string[] = () => []): PlatformIdentity[] {
  const row = (p: Platform, as: string): PlatformIdentity => {
    const configured = as === DEFAULT_IDENTITY ? (config.platforms[p.name] as { nick?: unknown } | undefined)?.nick : undefined;
    let known: string | undefined = typeof configured === 'string' ? configured : undefined;
    if (known === undefined && p.history !== undefined) {
      // Not awaited: the page shows "–" until the platform answers.
      p.history.selfId().then(
        (id) => (known = id),
        () => undefined,
      );
    }
    return { platform: p.name, as, identity: () => known, troubles: () => troubles(p.name, as) };
  };
  return [
    ...transports.all.map((p) => row(p, DEFAULT_IDENTITY)),
    ...transports.identities.flatMap((name) => (transports.as(name)?.all ?? []).map((p) => row(p, name))),
  ];
}
