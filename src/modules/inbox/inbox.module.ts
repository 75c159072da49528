import { errorSummary } from '../../infra/errors.js';
import { tablesOf } from '../../infra/db/tables.js';
import { InboundCatchUp } from '../../platforms/inbound-catchup.js';
import type { ChannelInfo } from '../../platforms/platform.js';
import type { JobsDeclaration, ModuleParts, ModuleServices } from '../contract.js';
import type { InboxSettings } from './settings.js';
import { deliveriesModule } from '../deliveries/index.js';
import { destinationsModule, LISTEN_CHANGED } from '../destinations/index.js';
import { HANDOFF_ARRIVED, handoffsModule } from '../handoffs/index.js';
import { identityModule, unregisteredOf, UNREGISTERED } from '../identity/index.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { identityFor } from '../../infra/policy/policy.js';
import { inboxOperations } from './inbox.http.js';
import { InboxMetrics } from './inbox.metrics.js';
import { catchupCursors, saveCatchupCursor } from './inbox.repository.js';
import { inboxScope, type ScopePorts } from './inbox.scope.js';
import { InboxService } from './inbox.service.js';
import type { InboxDb } from './inbox.table.js';
import { pushKind, pushQueue, type PushJob } from './inbox.webhook.js';

/** The event announcing that an event was stored in the inbox (its id). */
const HEARD = 'inbox.heard';
/** How often the holder of the live stream reads listened channels back while it holds it. */
const CATCHUP_EVERY_MS = 30_000;
/** Handoffs are taken in on news of one, and this often should that news be lost. */
const HANDOFF_POLL_MS = 5_000;
/** Which channels listen is read again at least this often (should news of a change be lost). */
const LISTENED_MAX_AGE_MS = 30_000;

/** Start the inbox module (its declaration is index.ts). */
export async function startInbox({ config, settings, db: tables, clock, log, registry, transports, events, doorbell, use, policy }: ModuleServices<InboxSettings>): Promise<ModuleParts<{ inbox: InboxService }>> {
  const db = tablesOf<InboxDb>(tables);
  const home = transports.home;
  const { sentByHerald } = use(deliveriesModule);
  const { identity } = use(identityModule);
  const { destinations } = use(destinationsModule);
  const { handoffs } = use(handoffsModule);
  const metrics = new InboxMetrics(registry);
  const webhook = settings.webhookUrl !== undefined && settings.webhookSecret !== undefined ? { url: settings.webhookUrl, secret: settings.webhookSecret } : undefined;

  // Which channels listen (home platform), with since when: read once, again on news of a change.
  let listened: Promise<Map<string, Date>> | undefined;
  let listenedAt = 0;
  const listenedNow = (): Promise<Map<string, Date>> => {
    if (listened === undefined || Date.now() - listenedAt > LISTENED_MAX_AGE_MS) {
      listenedAt = Date.now();
      listened = destinations.listened().then((rows) => new Map(rows.filter((r) => r.transport === home.name).map((r) => [r.channelId, r.since])));
      listened.catch(() => (listened = undefined));
    }
    return listened;
  };
  const unsubscribeListen = await events.subscribe(LISTEN_CHANGED, () => (listened = undefined));

  // Where events were written, as scopes and mentions ask: the mappings read when asked (a
  // mapping's change is heard at once), and a channel's guild and parent once per channel.
  const infos = new Map<string, Promise<ChannelInfo | undefined>>();
  const infoOf = (channelId: string): Promise<ChannelInfo | undefined> => {
    let known = infos.get(channelId);
    if (known === undefined) {
      if (infos.size > 10_000) infos.clear();
      known = home.channels?.getChannel(channelId) ?? Promise.resolve(undefined);
      known.catch(() => infos.delete(channelId));
      infos.set(channelId, known);
    }
    return known;
  };
  const scopePorts: ScopePorts = {
    destinationsByChannel: async () => {
      const byChannel = new Map<string, Set<string>>();
      for (const m of await destinations.list()) {
        if (m.channel_id === undefined) continue;
        const set = byChannel.get(m.channel_id) ?? new Set<string>();
        set.add(m.destination);
        byChannel.set(m.channel_id, set);
      }
      return byChannel;
    },
    parentOf: async (channelId) => (await infoOf(channelId))?.parentId,
  };

  const selfId = (speaksAs?: string): Promise<string> => {
    const bot = speaksAs === undefined ? home : transports.as(speaksAs)?.home;
    return bot?.history !== undefined ? bot.history.selfId() : Promise.reject(new Error(`the ${home.name} transport does not say who the bot ${speaksAs ?? DEFAULT_IDENTITY} is`));
  };
  const ownBots = ownBotIds(selfId, transports.identities);
  const inbox = new InboxService(
    db,
    {
      ...scopePorts,
      guildOf: async (channelId) => (await infoOf(channelId))?.guildId,
      selfId,
      ownBots,
      isRegistered: (userId, speaksAs) => identity.isRegistered(userId, speaksAs),
      sentByHerald,
      listened: async () => new Set((await listenedNow()).keys()),
      handoffClaims: (message) => handoffs.claims(message),
      handoffsSince: (after, limit) => handoffs.acceptedSince(after, limit),
    },
    clock,
    {
      platform: home.name,
      push: webhook !== undefined,
      pushIdentity: policy === undefined ? DEFAULT_IDENTITY : identityFor(policy, undefined),
      publish: (id) => events.publish(HEARD, id),
      ring: () => doorbell.ring(),
      log,
      metrics,
      // The fallback, should news of an event on another replica be lost.
      waitPollMs: Math.max(25, Math.round(config.pollMs / 4)),
    },
  );
  const unsubscribeHeard = await events.subscribe(HEARD, () => inbox.heardElsewhere());
  // A person who unregisters from a bot: their stored DMs with it go (on every replica that hears of it; the hourly prune checks too).
  const unsubscribeUnregistered = await events.subscribe(UNREGISTERED, (payloads) => {
    for (const payload of payloads ?? []) {
      const { userId, identity: bot } = unregisteredOf(payload);
      inbox.forget(userId, bot).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not delete an unregistered user\'s DMs; the prune will'));
    }
  });

  // The live stream: every message others write where the bot can see them, and reactions.
  const unlisten = home.inbound?.onMessage((m) => void inbox.admit(m, 'live'));
  const unreact = home.inbound?.onReaction?.((r) => inbox.react(r).catch((err: unknown) => log.warn({ err: errorSummary(err), message_id: r.messageId }, 'could not store a reaction')));
  // Each other bot's session: the DMs people registered with it write to it, and their reactions
  // there, heard as that bot's (only an agent speaking as it reads them; the service keeps nothing
  // else another bot hears).
  const otherBots = transports.identities.flatMap((name) => {
    const heard = transports.as(name)?.home.inbound;
    if (heard === undefined) return [];
    return [
      heard.onMessage((m) => void inbox.admit(m, 'live', name)),
      heard.onReaction?.((r) => inbox.react(r, name).catch((err: unknown) => log.warn({ err: errorSummary(err), message_id: r.messageId, identity: name }, 'could not store a reaction'))),
    ];
  });

  // Handoffs become events of the inbox, one at a time, in the order the handoff inbox took them in.
  let taking: Promise<void> = Promise.resolve();
  const takeHandoffs = (): void => {
    taking = taking.then(() => inbox.takeHandoffs()).then(
      () => undefined,
      (err: unknown) => log.warn({ err: errorSummary(err) }, 'could not take handoffs into the inbox; trying again later'),
    );
  };
  const unsubscribeHandoffs = handoffs.enabled ? await events.subscribe(HANDOFF_ARRIVED, () => takeHandoffs()) : undefined;
  const handoffTimer = handoffs.enabled ? setInterval(takeHandoffs, HANDOFF_POLL_MS) : undefined;
  handoffTimer?.unref();
  if (handoffs.enabled) takeHandoffs();

  // No gap: what was written in listened channels while this process did not hold the live stream
  // is read back from their history when it starts holding it (src/platforms/inbound-catchup.ts).
  const recent = home.inbound?.recent;
  const retentionMs = settings.retentionDays * 24 * 60 * 60 * 1000;
  const catchUp =
    recent !== undefined
      ? new InboundCatchUp({
          recent,
          channels: async () => {
            const now = await listenedNow();
            for (const [id, since] of now) listenedSince.set(id, since);
            return [...now.keys()];
          },
          cursors: (channels) => catchupCursors(db, channels),
          saveCursor: (channelId, afterId) => saveCatchupCursor(db, channelId, afterId, clock.now()),
          // From when the channel started listening, never past the retention.
          from: (channelId, now) => new Date(Math.max(now.getTime() - retentionMs, (listenedSince.get(channelId) ?? now).getTime())),
          admit: (message) => inbox.admit(message, 'catch-up'),
          clock,
          log,
          what: 'inbox',
          everyMs: CATCHUP_EVERY_MS,
        })
      : undefined;
  // `from` is synchronous: the map the sweep's own `channels` read filled.
  const listenedSince = new Map<string, Date>();
  // A channel that starts listening is read back from then on by the holder's next sweep, at once.
  const unsubscribeSince = await events.subscribe(LISTEN_CHANGED, () => {
    if (recent?.held() === true) catchUp?.kick();
  });
  catchUp?.start();

  const jobs: JobsDeclaration<PushJob>[] =
    webhook !== undefined
      ? [{ queue: pushQueue(db), kinds: [pushKind(db, clock, log, metrics, { ...webhook, giveUpMs: settings.webhookGiveUpSeconds * 1000, retryBaseMs: config.retryBaseMs })], listen: true }]
      : [];
  return {
    gives: { inbox },
    operations: [inboxOperations(inbox, (client) => inboxScope(policy, client, scopePorts))],
    jobs: jobs as unknown as JobsDeclaration[],
    prune: [{ what: 'the inbox', run: (now) => inbox.prune(now, retentionMs, settings.maxPerChannel) }],
    close: async () => {
      unlisten?.();
      unreact?.();
      for (const off of otherBots) off?.();
      unsubscribeHeard();
      unsubscribeUnregistered();
      unsubscribeListen();
      unsubscribeSince();
      unsubscribeHandoffs?.();
      if (handoffTimer !== undefined) clearInterval(handoffTimer);
      await catchUp?.close();
      await taking;
      inbox.close();
    },
  };
}

/**
 * The users of every bot of this Herald (`selfId` of the default bot, and of each of `others`),
 * kept once each has said who it is. Another bot that cannot say (its token revoked, Discord
 * unreachable) is left out and asked again next time: it must not stop the default bot's inbox;
 * the default bot's own failure fails the hearing, as it always did.
 */
export function ownBotIds(selfId: (identity?: string) => Promise<string>, others: readonly string[]): () => Promise<ReadonlySet<string>> {
  let bots: ReadonlySet<string> | undefined;
  return async () => {
    if (bots !== undefined) return bots;
    const theirs = await Promise.all(others.map((name) => selfId(name).catch(() => undefined)));
    const known = new Set([await selfId(), ...theirs.filter((id) => id !== undefined)]);
    if (theirs.every((id) => id !== undefined)) bots = known;
    return known;
  };
}
