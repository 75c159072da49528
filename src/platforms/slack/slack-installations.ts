import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { InvalidStateError, type InstallURLOptions, type StateStore } from '@slack/oauth';
import { sql, type Kysely } from 'kysely';
import { seal, unseal } from './credentials.js';

// Where Slack installs from Herald are kept (migrations/2026-12-08T00-10-00_slack-installations.ts):
// one row per identity `name=install`, its tokens sealed (AES-256-GCM under HERALD_CREDENTIALS_KEY),
// read by every replica; and the states of installs under way, each good once. The routes that
// make them are slack-install.ts's; the bots that speak with them, slack-installed-bot.ts's.

/** The scopes Herald's bot asks for: what its sends, reads and Socket Mode commands use. */
export const BOT_SCOPES = ['chat:write', 'channels:read', 'channels:history', 'channels:join', 'groups:read', 'groups:history', 'im:write', 'im:history', 'reactions:write', 'users:read', 'commands'];
/** How long an install may take between its start and Slack's redirect back (as the state cookie). */
export const STATE_MS = 10 * 60_000;

export interface SlackInstallationTable {
  identity: string;
  team_id: string;
  enterprise_id: string | null;
  bot_user_id: string;
  /** Sealed (credentials.ts), bound to the identity. */
  bot_token: string;
  refresh_token: string | null;
  token_expires_at: Date | null;
  /** When the bot token was handed over (by the install, or the last refresh). */
  token_issued_at: Date | null;
  /** Until when one replica is refreshing the token (Slack's token rotation): a refresh token is good once. */
  refreshing_until: Date | null;
  installed_at: Date;
  revoked_at: Date | null;
}

export interface SlackInstallStateTable {
  /** SHA-256 of the state: the state itself is only in the installer's cookie and Slack's redirect. */
  state_hash: string;
  /** SHA-256 of the installer's own cookie (BINDER_COOKIE), which no URL carries: the install is finished only by the browser that started it. */
  binder_hash: string;
  identity: string;
  redirect_uri: string;
  expires_at: Date;
}

export interface SlackInstallDb {
  slack_installations: SlackInstallationTable;
  slack_install_states: SlackInstallStateTable;
}

/** A workspace the install would give to a second identity. */
export class WorkspaceTakenError extends Error {
  constructor(readonly team: string, readonly owner: string) {
    super(`workspace ${team} is already ${owner === 'SLACK_BOT_TOKEN' ? "SLACK_BOT_TOKEN's (the identity default)" : `identity ${owner}'s`}: each identity of HERALD_SLACK_IDENTITIES is a workspace of its own`);
    this.name = 'WorkspaceTakenError';
  }
}

/** A token Herald holds whose workspace Slack could not be asked about: the install cannot tell whether it takes another identity's workspace. */
export class WorkspaceUnknownError extends Error {
  constructor(what: string, options?: ErrorOptions) {
    super(`Slack could not say which workspace ${what}'s token is for, so Herald cannot tell whether this workspace is already another identity's`, options);
    this.name = 'WorkspaceUnknownError';
  }
}

/** An install for an identity that is not declared `name=install` (any more). */
export class NotInstallableError extends Error {
  constructor(identity: string) {
    super(`identity ${identity} is not declared ${identity}=install in HERALD_SLACK_IDENTITIES`);
    this.name = 'NotInstallableError';
  }
}

/** An installed workspace, its token opened. */
export interface InstalledWorkspace {
  readonly teamId: string;
  readonly botUserId: string;
  readonly token: string;
  /** When this install was made: a later one (another workspace, a new token) has another. */
  readonly installedAt: Date;
  /** With Slack's token rotation: when the token was handed over, and when it expires. */
  readonly issuedAt: Date | undefined;
  readonly expiresAt: Date | undefined;
}

/** A rotated token pair, as oauth.v2.access (grant_type=refresh_token) answers it. */
export interface RefreshedTokens {
  readonly botToken: string;
  readonly refreshToken: string;
  readonly expiresAt: Date;
}

/** The installations table and the states of installs under way: one query each. */
export class SlackInstallations {
  constructor(
    private readonly db: Kysely<SlackInstallDb>,
    private readonly key: Buffer,
  ) {}

  /**
   * Slack said the app left workspace `team` (app_uninstalled, tokens_revoked): its installation,
   * if an identity's, is revoked (kept, with when). The identities it was, none when it was none's.
   */
  async revokeTeam(team: string, now: Date, eventAt: Date = now): Promise<string[]> {
    // Only installs made before Slack's event: one made since (a late or repeated event) stays.
    const rows = await this.db.updateTable('slack_installations').set({ revoked_at: now }).where('team_id', '=', team).where('revoked_at', 'is', null).where('installed_at', '<=', eventAt).returning('identity').execute();
    return rows.map((r) => r.identity);
  }

  /** When the identity's installation was revoked (its workspace uninstalled the app); undefined: it is not. */
  async revokedAt(identity: string): Promise<Date | undefined> {
    const row = await this.db.selectFrom('slack_installations').select('revoked_at').where('identity', '=', identity).executeTakeFirst();
    return row?.revoked_at === null || row?.revoked_at === undefined ? undefined : new Date(row.revoked_at);
  }

  /** The identity's workspace, when the app is installed there (and not revoked). */
  async find(identity: string): Promise<InstalledWorkspace | undefined> {
    const row = await this.db.selectFrom('slack_installations').select(['team_id', 'bot_user_id', 'bot_token', 'installed_at', 'token_issued_at', 'token_expires_at']).where('identity', '=', identity).where('revoked_at', 'is', null).executeTakeFirst();
    if (row === undefined) return undefined;
    const date = (d: Date | null): Date | undefined => (d === null ? undefined : new Date(d));
    return { teamId: row.team_id, botUserId: row.bot_user_id, token: unseal(this.key, row.bot_token, identity), installedAt: new Date(row.installed_at), issuedAt: date(row.token_issued_at), expiresAt: date(row.token_expires_at) };
  }

  /**
   * Take the refresh of the identity's token (Slack's token rotation) for `leaseMs`: its refresh
   * token, unless another replica is refreshing it now or it has none. One refresh at a time
   * across every replica: Slack spends a refresh token as it is used.
   */
  async takeRefresh(identity: string, leaseMs: number): Promise<{ refreshToken: string; installedAt: Date; until: Date } | undefined> {
    // On the database's clock, the same for every replica (a replica whose clock is ahead must not end another's lease early).
    const row = await this.db
      .updateTable('slack_installations')
      // To the millisecond: refreshed() finds its lease again by this value, as JavaScript holds it.
      .set({ refreshing_until: sql<Date>`date_trunc('milliseconds', now() + ${`${leaseMs} milliseconds`}::interval)` })
      .where('identity', '=', identity)
      .where('revoked_at', 'is', null)
      .where('refresh_token', 'is not', null)
      .where((eb) => eb.or([eb('refreshing_until', 'is', null), eb('refreshing_until', '<', sql<Date>`now()`)]))
      .returning(['refresh_token', 'installed_at', 'refreshing_until'])
      .executeTakeFirst();
    if (row?.refresh_token == null || row.refreshing_until === null) return undefined;
    return { refreshToken: unseal(this.key, row.refresh_token, `${identity}:refresh`), installedAt: row.installed_at, until: row.refreshing_until };
  }

  /**
   * Keep the tokens a refresh gave (and end the refresh), only into the install they were refreshed
   * for (`installedAt`): a revoked install keeps none, and one made again meanwhile (another
   * workspace, a new token) is not overwritten by the old one's refreshed token. False: not kept.
   */
  async refreshed(identity: string, taken: { installedAt: Date; until: Date }, tokens: RefreshedTokens, now: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('slack_installations')
      .set({ bot_token: seal(this.key, tokens.botToken, identity), refresh_token: seal(this.key, tokens.refreshToken, `${identity}:refresh`), token_expires_at: tokens.expiresAt, token_issued_at: now, refreshing_until: null })
      .where('identity', '=', identity)
      .where('installed_at', '=', taken.installedAt)
      // Still this refresh's lease: one that outlived it may have been taken by another replica.
      .where('refreshing_until', '=', taken.until)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }


  /**
   * Keep the identity's installation (a new install of it replaces the last), in one transaction
   * that first refuses a workspace another identity holds; the partial unique index on team_id
   * refuses the same when two replicas race.
   */
  async store(identity: string, i: { teamId: string; enterpriseId: string | undefined; botUserId: string; botToken: string; refreshToken: string | undefined; expiresAt: Date | undefined }, now: Date): Promise<void> {
    const row = {
      identity,
      team_id: i.teamId,
      enterprise_id: i.enterpriseId ?? null,
      bot_user_id: i.botUserId,
      bot_token: seal(this.key, i.botToken, identity),
      refresh_token: i.refreshToken === undefined ? null : seal(this.key, i.refreshToken, `${identity}:refresh`),
      token_expires_at: i.expiresAt ?? null,
      token_issued_at: now,
      refreshing_until: null,
      installed_at: now,
      revoked_at: null,
    };
    try {
      await this.db.transaction().execute(async (trx) => {
        const other = await trx.selectFrom('slack_installations').select('identity').where('team_id', '=', i.teamId).where('revoked_at', 'is', null).where('identity', '<>', identity).executeTakeFirst();
        if (other !== undefined) throw new WorkspaceTakenError(i.teamId, other.identity);
        const { identity: _key, ...update } = row;
        await trx.insertInto('slack_installations').values(row).onConflict((oc) => oc.column('identity').doUpdateSet(update)).execute();
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new WorkspaceTakenError(i.teamId, 'another identity');
      throw err;
    }
  }

  /**
   * The OAuth states, kept in the store so that any replica finishes an install another began;
   * each is good once (deleted as it is read) and for ten minutes. Only its hash is stored.
   */
  stateStore(now: () => Date): StateStore {
    return {
      generateStateParam: async (options: InstallURLOptions) => {
        const state = randomBytes(32).toString('base64url');
        const at = now();
        // The install route's metadata: the identity, and the hash of the installer's binder cookie.
        const { identity, binderHash } = JSON.parse(options.metadata ?? '{}') as { identity?: string; binderHash?: string };
        if (identity === undefined || binderHash === undefined) throw new Error('an install starts only from the install route');
        await this.db.deleteFrom('slack_install_states').where('expires_at', '<', at).execute();
        await this.db
          .insertInto('slack_install_states')
          .values({ state_hash: hashOf(state), binder_hash: binderHash, identity, redirect_uri: options.redirectUri ?? '', expires_at: new Date(at.getTime() + STATE_MS) })
          .execute();
        return state;
      },
      verifyStateParam: async (_now: Date, state: string) => {
        const row = await this.db.deleteFrom('slack_install_states').where('state_hash', '=', hashOf(state)).returning(['identity', 'redirect_uri', 'expires_at']).executeTakeFirst();
        if (row === undefined || row.expires_at.getTime() < now().getTime()) throw new InvalidStateError('The state is unknown, expired or already used.');
        return { scopes: BOT_SCOPES, redirectUri: row.redirect_uri, metadata: row.identity };
      },
    };
  }

  /**
   * Whether the browser finishing an install is the one that started it: its binder cookie's hash
   * is the state's. True for a state Herald does not know (the provider then refuses it, as unknown).
   */
  async boundTo(state: string, binder: string | undefined): Promise<boolean> {
    const row = await this.db.selectFrom('slack_install_states').select('binder_hash').where('state_hash', '=', hashOf(state)).executeTakeFirst();
    if (row === undefined) return true;
    const given = Buffer.from(hashOf(binder ?? ''), 'hex');
    const kept = Buffer.from(row.binder_hash, 'hex');
    return binder !== undefined && given.length === kept.length && timingSafeEqual(given, kept);
  }
}

export function hashOf(state: string): string {
  return createHash('sha256').update(state).digest('hex');
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}
