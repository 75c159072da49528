import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { channelKey, identityFor, rulesFor, type Policy, type Rules } from '../../infra/policy/policy.js';
import { principalName } from '../../infra/policy/principal.js';
import type { InboxEventRow } from './inbox.table.js';

/** The tools whose grant lets an OAuth client read DMs from the inbox. */
export const DM_TOOLS: readonly string[] = ['send_dm'];

/** The connector's cursor row (whoever holds the bridge token, without an OAuth client). */
export const CONNECTOR = 'connector';

/**
 * Whose inbox a call reads: a cursor of its own, and which events it may see. The connector (the
 * bridge token's caller) and each OAuth client of `herald mcp --http` (named by the header the
 * bridge trusts from the bridge token's caller, src/infra/http/policy.middleware.ts) each have
 * their own cursor; their policy's rules decide what they see.
 */
export interface InboxScope {
  /** Its cursor's row in inbox_cursors. */
  readonly cursor: string;
  /** The identity it speaks as: of the DMs, it sees only those written to that bot. */
  readonly identity: string;
  /** Which of these events it may see, in order; undefined: every one (the connector without rules). */
  readonly visible: ((rows: readonly InboxEventRow[]) => Promise<InboxEventRow[]>) | undefined;
}

/** What a scope asks about where an event was written. */
export interface ScopePorts {
  /** The destinations each home-platform channel maps to (read when a call needs it). */
  destinationsByChannel(): Promise<ReadonlyMap<string, ReadonlySet<string>>>;
  /** A thread's parent channel, if the platform says. */
  parentOf(channelId: string): Promise<string | undefined>;
}

/** An event in a DM (a registered user's message, or a reaction there): no guild, and no handoff. */
export function inDm(row: Pick<InboxEventRow, 'guild_id' | 'kind'>): boolean {
  return row.guild_id === null && row.kind !== 'handoff';
}

/**
 * Whether a reader speaking as `identity` may see an event at all (its policy's rules decide on
 * top): what its own bot heard said to it (DMs; another bot's mentions), never what another bot
 * heard; what the default bot heard in channels (mentions of it, replies, listened channels) and
 * handoffs are every reader's. inbox.repository.ts listEvents asks the same in SQL.
 */
export function addressedTo(row: Pick<InboxEventRow, 'guild_id' | 'kind' | 'identity'>, identity: string): boolean {
  return row.identity === identity || row.kind === 'handoff' || (row.guild_id !== null && row.identity === DEFAULT_IDENTITY);
}

/** The inbox scope of a caller with the bridge token: `client` is the OAuth client's id, if any. */
export function inboxScope(policy: Policy | undefined, client: string | undefined, ports: ScopePorts): InboxScope {
  const rules = policy === undefined ? [] : rulesFor(policy, client);
  const own = client === undefined ? undefined : policy?.clients.get(client);
  // The connector reads DMs; an OAuth client only where the operator granted it a DM tool by name
  // (and the connector's rules leave that tool on): a `read` client does not see people's DMs.
  const dms = client === undefined || (own?.tools !== undefined && DM_TOOLS.some((t) => own.tools?.has(t) === true && (policy?.connector.tools?.has(t) ?? true)));
  const limited = rules.some((r) => r.platforms !== undefined || r.channels !== undefined || r.destinations !== undefined);
  const cursor = client === undefined ? CONNECTOR : principalName(client);
  const identity = policy === undefined ? DEFAULT_IDENTITY : identityFor(policy, client);
  if (dms && !limited) return { cursor, identity, visible: undefined };
  return {
    cursor,
    identity,
    visible: async (rows) => {
      const needDestinations = rules.some((r) => r.destinations !== undefined);
      const byChannel = needDestinations ? await ports.destinationsByChannel() : new Map<string, ReadonlySet<string>>();
      const out: InboxEventRow[] = [];
      for (const row of rows) if (await allowed(row, rules, dms, byChannel, ports)) out.push(row);
      return out;
    },
  };
}

async function allowed(row: InboxEventRow, rules: readonly Rules[], dms: boolean, byChannel: ReadonlyMap<string, ReadonlySet<string>>, ports: ScopePorts): Promise<boolean> {
  if (inDm(row)) return dms && rules.every((r) => r.platforms === undefined || r.platforms.has(row.platform));
  // A thread stands for its channel: the rules name channels and destinations, not threads.
  let parent: string | undefined | null = null;
  const parentOf = async (): Promise<string | undefined> => {
    if (parent === null) parent = row.thread_id !== null ? await ports.parentOf(row.thread_id).catch(() => undefined) : undefined;
    return parent;
  };
  for (const r of rules) {
    if (r.platforms !== undefined && !r.platforms.has(row.platform)) return false;
    if (r.channels !== undefined && !r.channels.has(channelKey(row.channel_id))) {
      const p = await parentOf();
      if (p === undefined || !r.channels.has(channelKey(p))) return false;
    }
    if (r.destinations !== undefined) {
      const here = byChannel.get(row.channel_id) ?? byChannel.get((await parentOf()) ?? '');
      if (here === undefined || ![...here].some((d) => r.destinations?.has(d) === true)) return false;
    }
  }
  return true;
}
