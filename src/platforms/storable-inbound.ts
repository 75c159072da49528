import { storableText, storableValue } from '../infra/contract/storable.js';
import type { CommandInvocation } from './commands.js';
import type { RunningPlatform, Surfaces } from './plugin.js';
import type { Inbound, InboundHistory, Platform } from './platform.js';

/**
 * A started platform whose inbound events and command invocations are made storable as they enter
 * (what `storableFacets` does for events; each invocation's names and options likewise).
 */
export function storableRunning(started: RunningPlatform): RunningPlatform {
  const serve = started.serve?.bind(started);
  return {
    facets: storableFacets(started.facets),
    // Each identity's facets pass the same gate as the default's.
    ...(started.identities !== undefined ? { identities: new Map([...started.identities].map(([name, facets]) => [name, storableFacets(facets)])) } : {}),
    readiness: () => started.readiness(),
    ...(started.identityReadiness !== undefined ? { identityReadiness: () => started.identityReadiness?.() ?? {} } : {}),
    ...(serve !== undefined ? { serve: (surfaces: Partial<Surfaces>) => serve(storableSurfaces(surfaces)) } : {}),
    ...(started.routes !== undefined ? { routes: started.routes } : {}),
    close: () => started.close(),
  };
}

function storableSurfaces(surfaces: Partial<Surfaces>): Partial<Surfaces> {
  const commands = surfaces.commands;
  if (commands === undefined) return surfaces;
  const everyBot = commands.everyBot;
  return {
    ...surfaces,
    commands: {
      definitions: commands.definitions,
      run: (invocation) => commands.run(storableInvocation(invocation)),
      ...(everyBot !== undefined ? { everyBot: { definitions: everyBot.definitions, run: (invocation: CommandInvocation) => everyBot.run(storableInvocation(invocation)) } } : {}),
    },
  };
}

/** A command invocation with every text a person chose (their names, the options) made storable. */
export function storableInvocation(invocation: CommandInvocation): CommandInvocation {
  return {
    user: storableValue({ ...invocation.user }),
    guildId: invocation.guildId,
    channelId: invocation.channelId,
    name: storableText(invocation.name),
    subcommand: invocation.subcommand === null ? null : storableText(invocation.subcommand),
    option: (name) => {
      const value = invocation.option(name);
      return value === null ? null : storableText(value);
    },
    canManageGuild: invocation.canManageGuild,
    ...(invocation.platform !== undefined ? { platform: invocation.platform } : {}),
    ...(invocation.identity !== undefined ? { identity: invocation.identity } : {}),
  };
}

/**
 * A platform's facets with every inbound event made storable, once, where events enter Herald: each
 * message (live, or read back from history after a failover) and each reaction reaches the modules
 * (the inbox, handoffs) with no U+0000 and no lone surrogate in any of its text, which PostgreSQL
 * would refuse (src/infra/contract/storable.ts). An event cannot be answered with a 400, and one
 * bad character must not cost it. Applied to every platform as it starts (src/platforms/start.ts),
 * so a platform added later is covered without doing anything.
 */
export function storableFacets(facets: Platform): Platform {
  const inbound = facets.inbound;
  if (inbound === undefined) return facets;
  return Object.create(facets, { inbound: { value: storableInbound(inbound), enumerable: true } }) as Platform;
}

function storableInbound(inbound: Inbound): Inbound {
  const onReaction = inbound.onReaction?.bind(inbound);
  return {
    onMessage: (listener) => inbound.onMessage((message) => listener(storableValue(message))),
    ...(onReaction !== undefined ? { onReaction: (listener) => onReaction((reaction) => listener(storableValue(reaction))) } : {}),
    ...(inbound.recent !== undefined ? { recent: storableHistory(inbound.recent) } : {}),
  } satisfies Inbound;
}

function storableHistory(recent: InboundHistory): InboundHistory {
  return {
    held: () => recent.held(),
    onHeld: (listener) => recent.onHeld(listener),
    channels: (signal) => recent.channels(signal),
    since: async (channelId, afterId, from, signal) => {
      const page = await recent.since(channelId, afterId, from, signal);
      return { ...page, messages: page.messages.map((m) => storableValue(m)) };
    },
  };
}
