import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';

/** How long a confirm token stays good: long enough for an agent to ask its person, short enough to be stale soon. */
export const CONFIRM_TTL_MS = 5 * 60_000;

/**
 * What a confirm token is bound to: who asked (`connector` or `client:<id>`), what (`op:<operationId>`
 * or `tool:<name>`) and with which arguments (a hash of them; see argumentsHash).
 */
export interface ConfirmBinding {
  subject: string;
  what: string;
  args: string;
}

/** Why a token does not confirm a call. */
export type ConfirmProblem = 'invalid' | 'expired' | 'used';

/** A hash of a call's arguments, keys in a fixed order: the same arguments give the same hash. */
export function argumentsHash(value: unknown): string {
  return createHash('sha256').update(canonical(value)).digest('base64url');
}

/**
 * The value as JSON, object keys sorted, undefined members left out. Built with a stack of its own,
 * not by recursion: it runs on a body before the input gate, and a body may nest thousands deep.
 */
function canonical(root: unknown): string {
  const out: string[] = [];
  // Text to write as it is, or a value (boxed) to write as JSON; popped in order.
  const pending: (string | { readonly value: unknown })[] = [{ value: root }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next === 'string') {
      out.push(next);
      continue;
    }
    const { value } = next;
    if (Array.isArray(value)) {
      pending.push(']');
      for (let i = value.length - 1; i >= 0; i--) pending.push({ value: value[i] as unknown }, ...(i > 0 ? [','] : []));
      pending.push('[');
    } else if (typeof value === 'object' && value !== null) {
      const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
      entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      pending.push('}');
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, v] = entries[i] as [string, unknown];
        pending.push({ value: v }, `${JSON.stringify(k)}:`, ...(i > 0 ? [','] : []));
      }
      pending.push('{');
    } else out.push(JSON.stringify(value) ?? 'null');
  }
  return out.join('');
}

/** The key confirm tokens are signed with, derived from a secret both `herald serve` and `herald mcp` hold (the bridge token). */
export function confirmKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('herald confirm tokens v1').digest();
}

/**
 * One-use confirm tokens: `<payload>.<hmac>`, the payload carrying the binding, an expiry and a
 * random id. Minting needs no store; checking a token needs none either (`verify`); using one
 * (`redeem`) records its id in the store (table policy_confirmations), so it is used once across
 * every replica. The same call retried (the same retry key) may present it again.
 */
export class ConfirmTokens {
  constructor(
    private readonly key: Buffer,
    private readonly db: Kysely<unknown> | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  mint(binding: ConfirmBinding): { token: string; expiresAt: Date } {
    const expires = this.now() + CONFIRM_TTL_MS;
    const payload = Buffer.from(JSON.stringify({ s: binding.subject, w: binding.what, a: binding.args, e: expires, n: randomBytes(12).toString('base64url') })).toString('base64url');
    return { token: `${payload}.${this.sign(payload)}`, expiresAt: new Date(expires) };
  }

  /** The token's id when it is genuine, bound to exactly this and not expired; else why not. */
  verify(token: string, binding: Omit<ConfirmBinding, 'args'> & { args?: string }): { tokenId: string } | { problem: ConfirmProblem } {
    const [payload, mac, extra] = token.split('.');
    if (payload === undefined || mac === undefined || extra !== undefined) return { problem: 'invalid' };
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { problem: 'invalid' };
    let claims: { s?: unknown; w?: unknown; a?: unknown; e?: unknown; n?: unknown };
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof claims;
    } catch {
      return { problem: 'invalid' };
    }
    if (claims.s !== binding.subject || claims.w !== binding.what || (binding.args !== undefined && claims.a !== binding.args) || typeof claims.n !== 'string') return { problem: 'invalid' };
    if (typeof claims.e !== 'number' || claims.e <= this.now()) return { problem: 'expired' };
    return { tokenId: claims.n };
  }

  /**
   * Use the token for one call (`key`: that call's retry key): undefined when it confirms the call,
   * else why not. Without a store (herald mcp), verified only; the store Herald serves from records the use.
   */
  async redeem(token: string, binding: Omit<ConfirmBinding, 'args'> & { args?: string }, key: string): Promise<ConfirmProblem | undefined> {
    const checked = this.verify(token, binding);
    if ('problem' in checked) return checked.problem;
    if (this.db === undefined) return undefined;
    const db = this.db as Kysely<ConfirmTables>;
    const at = new Date(this.now());
    await db.deleteFrom('policy_confirmations').where('at', '<', new Date(at.getTime() - 2 * CONFIRM_TTL_MS)).execute();
    const inserted = await db.insertInto('policy_confirmations').values({ token_id: checked.tokenId, key, at }).onConflict((oc) => oc.doNothing()).returning('token_id').executeTakeFirst();
    if (inserted !== undefined) return undefined;
    const row = await db.selectFrom('policy_confirmations').select('key').where('token_id', '=', checked.tokenId).executeTakeFirst();
    return row?.key === key ? undefined : 'used';
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }
}

interface ConfirmTables {
  policy_confirmations: { token_id: string; key: string; at: Date };
}
