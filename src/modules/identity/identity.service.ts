import type { Kysely } from 'kysely';
import type { Clock } from '../../infra/clock.js';
import type { IdentityDb } from './identity.table.js';
import { NotFoundError } from '../../infra/errors.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import {
  deleteRegistration,
  findPairing,
  findRegistration,
  insertPairingCode,
  insertRegistration,
  listRegistrations,
  redeemPairingCode,
  savePairing,
  trimPairingCodes,
} from './identity.repository.js';
import { CODE_TTL_MS, hashPairingCode, MAX_LIVE_CODES, newGeneration, newPairingCode, truncateDisplayName } from './pairing-code.js';

export interface DiscordUser {
  id: string;
  username: string;
  globalName: string | null;
  /** The platform they registered through (absent: the home platform). */
  platform?: string | undefined;
  /** The bot they registered with (absent: the default one). */
  identity?: string | undefined;
}

export const MAX_RECIPIENTS = 100;

/**
 * People's registrations with Herald's bots, one-time pairing codes, revocation. Each is with one bot
 * (an identity, src/infra/policy/identity.ts): a person registers with each bot that may reach them,
 * through that bot's own `/agent`, and an agent speaking as a bot pairs with and DMs only the people
 * registered with it. The `identity` arguments default to the default bot's.
 */
export class IdentityService {
  constructor(
    private readonly db: Kysely<IdentityDb>,
    private readonly clock: Clock,
    /** The home platform's name: a registration from an invocation that names none is there. */
    private readonly home: string,
    /** Told after an unregister from a bot was committed (the module publishes it to every replica). */
    private readonly unregistered?: (userId: string, identity: string) => void,
  ) {}

  /** Whether the user is registered with `identity`'s bot now. */
  async isRegistered(userId: string, identity = DEFAULT_IDENTITY): Promise<boolean> {
    return (await findRegistration(this.db, identity, userId)) !== undefined;
  }

  /** First registration mints a generation; registering again changes nothing. */
  async register(user: DiscordUser): Promise<'registered' | 'already registered'> {
    const inserted = await insertRegistration(this.db, {
      identity: user.identity ?? DEFAULT_IDENTITY,
      user_id: user.id,
      generation: newGeneration(),
      display_name: user.globalName ?? user.username,
      registered_at: this.clock.now(),
      // Always named, so a registration follows its person whatever HERALD_TRANSPORT becomes.
      transport: user.platform ?? this.home,
    });
    return inserted !== undefined ? 'registered' : 'already registered';
  }

  /** A new single-use code for a registered user; at most 5 stay live (a 6th drops the oldest). */
  async pair(userId: string, identity = DEFAULT_IDENTITY): Promise<{ code: string } | 'not registered'> {
    return this.db.transaction().execute(async (trx) => {
      const registration = await findRegistration(trx, identity, userId);
      if (registration === undefined) return 'not registered';
      const code = newPairingCode();
      const now = this.clock.now();
      await insertPairingCode(trx, {
        code_hash: hashPairingCode(code),
        identity,
        user_id: userId,
        generation: registration.generation,
        issued_at: now,
        expires_at: new Date(now.getTime() + CODE_TTL_MS),
      });
      await trimPairingCodes(trx, identity, userId, MAX_LIVE_CODES, now);
      return { code };
    });
  }

  /** Delete the registration with `identity`'s bot and every outstanding code of it in one statement. */
  async unregister(userId: string, identity = DEFAULT_IDENTITY): Promise<boolean> {
    const removed = await deleteRegistration(this.db, identity, userId);
    // What others keep of a person with this bot (the inbox: their DMs with it) goes too.
    if (removed) this.unregistered?.(userId, identity);
    return removed;
  }

  /**
   * Uses a code and keeps the pairing for `principal` (the caller: `connector` or `client:<id>`) in
   * the same transaction: a used code always left its pairing behind, whichever way it was redeemed.
   * Only a code of `identity`'s bot (the caller's): another bot's code is invalid for it, and stays unused.
   */
  async redeem(code: string, principal: string, identity = DEFAULT_IDENTITY): Promise<{ discord_user_id: string; generation: string; platform?: string; user_id: string }> {
    const now = this.clock.now();
    const used = await this.db.transaction().execute(async (trx) => {
      const row = await redeemPairingCode(trx, identity, hashPairingCode(code), now);
      if (row !== undefined) await savePairing(trx, { principal, identity, user_id: row.user_id, generation: row.generation, paired_at: now });
      return row;
    });
    if (used === undefined) throw new NotFoundError('invalid or expired code');
    // Home-platform registrations answer exactly as before; another platform's say which.
    const platform = used.transport ?? this.home;
    return { discord_user_id: used.user_id, generation: used.generation, ...(platform !== this.home ? { platform } : {}), user_id: used.user_id };
  }

  /** Whom `principal` is paired with (its last redeemed code of `identity`'s bot), from the store. */
  async pairing(principal: string, identity = DEFAULT_IDENTITY): Promise<{ user_id: string; generation: string; paired_at: string; platform?: string }> {
    const row = await findPairing(this.db, identity, principal);
    if (row === undefined) throw new NotFoundError('not paired');
    const platform = row.transport ?? this.home;
    return { user_id: row.user_id, generation: row.generation, paired_at: new Date(row.paired_at).toISOString(), ...(platform !== this.home ? { platform } : {}) };
  }

  async registration(userId: string, identity = DEFAULT_IDENTITY): Promise<{ generation: string }> {
    const row = await findRegistration(this.db, identity, userId);
    if (row === undefined) throw new NotFoundError('not registered');
    return { generation: row.generation };
  }

  /** The people `identity`'s bot may reach: those registered with it. */
  async recipients(identity = DEFAULT_IDENTITY): Promise<{ items: { user_id: string; display_name: string }[] }> {
    const rows = await listRegistrations(this.db, identity, MAX_RECIPIENTS);
    return { items: rows.map((r) => ({ user_id: r.user_id, display_name: truncateDisplayName(r.display_name) })) };
  }
}
