import { createHash, randomBytes } from 'node:crypto';
import type { Context as KoaContext } from 'koa';
import type { Kysely } from 'kysely';
import { Counter, type Registry } from 'prom-client';
import { argumentsHash, ConfirmTokens, type ConfirmProblem } from '../policy/confirm.js';
import { declarationOf, pointed, pointedAll, type PolicyDeclaration, type PolicyInput } from '../policy/declaration.js';
import { DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES, identityFor, NO_POLICY, NO_RULES, refusedBy, rulesFor, type Intent, type Policy, type PolicyRule, type Rules } from '../policy/policy.js';
import { DEFAULT_IDENTITY } from '../policy/identity.js';
import { principalName } from '../policy/principal.js';
import { PolicyUsage, strictestCap } from '../policy/usage.js';
import { errorReply, type Reply } from './reply.js';

/**
 * The header `herald mcp` names an OAuth client by, so that client's rules hold on the bridge too.
 * Trusted only from the bridge token's caller, and only ever adds rules: the connector's always hold.
 */
export const POLICY_CLIENT_HEADER = 'x-herald-policy-client';

/**
 * Who is calling, as the policy and an agent's own records name it (principalName): an OAuth
 * client `herald mcp` names (trusted from the bridge token's caller only), else `connector`.
 */
export function principalOf(ctx: KoaContext | undefined): string {
  return principalName(ctx !== undefined && ctx.state['authenticated'] === 'bridge' ? ctx.get(POLICY_CLIENT_HEADER) : undefined);
}

/**
 * The identity the caller speaks as (src/infra/policy/identity.ts): its OAuth client's binding in
 * the operator's policy (the client `herald mcp` names, trusted from the bridge token's caller
 * only), else the connector's, else `default`.
 */
export function identityOf(ctx: KoaContext | undefined, policy: Policy | undefined): string {
  const client = ctx !== undefined && ctx.state['authenticated'] === 'bridge' ? ctx.get(POLICY_CLIENT_HEADER) || undefined : undefined;
  return identityFor(policy ?? NO_POLICY, client);
}

/** The header a confirming second call carries its confirm token in (the first call's answer, 428). */
export const CONFIRM_HEADER = 'herald-confirm';

/** Refusals by the operator's policy, by rule and where (`http`: the API; `mcp`: herald mcp's own checks). */
export function policyRefusals(registry: Registry): Counter<'rule' | 'surface'> {
  const existing = registry.getSingleMetric('herald_policy_refusals_total');
  if (existing !== undefined) return existing as Counter<'rule' | 'surface'>;
  return new Counter({
    name: 'herald_policy_refusals_total',
    help: "Calls the operator's policy (HERALD_POLICY) refused, by the rule that refused them and the surface (http: the API; mcp: herald mcp)",
    labelNames: ['rule', 'surface'],
    registers: [registry],
  });
}

/**
 * A policy refusal as the contract words it: 403 (PolicyRefused), or, for a rate cap used up, 429
 * with `Retry-After` (TooManyRequests), the same body shape.
 */
export function policyReply(rule: PolicyRule, retryAfterSeconds?: number): Reply {
  if (rule === 'rate_per_minute' || rule === 'rate_per_day') {
    return errorReply<'TooManyRequests'>(429, { error: `refused by policy: ${rule}` }, { 'Retry-After': String(Math.max(1, retryAfterSeconds ?? 1)) });
  }
  return errorReply<'PolicyRefused'>(403, { error: `refused by policy: ${rule}` as never });
}

/** What an upload may still hold, per subject whose rules cap it: set on the request's state for the upload's handler. */
export interface UploadCap {
  /** `connector`, or `client:<OAuth client id>`. */
  subject: string;
  /** undefined: counted (the subject's total), not capped. */
  maxTotalBytes: number | undefined;
}

/** The state key the policy leaves the caller's upload caps under (uploadCapsOf reads it). */
const UPLOAD_CAPS = 'policyUploadCaps';

/** The caller's upload caps, as the policy left them on the request (none for a caller the policy does not hold). */
export function uploadCapsOf(ctx: KoaContext): readonly UploadCap[] {
  return (ctx.state[UPLOAD_CAPS] as UploadCap[] | undefined) ?? [];
}

/** An earlier send's own input (its kind and target), as its operation took it: where it went. */
export type OriginalOf = (messageRef: string) => Promise<PolicyInput | undefined>;

export interface PolicyCheckOptions {
  /** The operator's policy; with no file, the empty one (an OAuth client's defaults still hold). */
  policy: Policy;
  db: Kysely<unknown>;
  registry: Registry;
  /** The key confirm tokens are signed with (confirmKey of the bridge token). */
  confirmKey: Buffer;
  /** The defaults a declaration's `platform_default` names (e.g. the platform a caller gets when it names none). */
  defaults?: Readonly<Record<string, string>>;
  /** Where an earlier send went (by its request_id), for a declaration's `message_ref`: given by the wiring. */
  originalOf?: OriginalOf;
  now?: () => number;
}

/** What the API asks before handling any operation it matched: undefined to go ahead, or the answer. */
export type PolicyCheck = (ctx: KoaContext, operationId: string | undefined, operation: unknown, input: PolicyInput) => Promise<Reply | undefined>;

/** Where a call goes, from its declaration's pointers into its input. */
function targetOf(d: PolicyDeclaration, input: PolicyInput, defaults: Readonly<Record<string, string>>): Pick<Intent, 'destination' | 'channel' | 'platform'> {
  const platform = pointed(input, d.platform) ?? (d.platform_default === undefined ? undefined : defaults[d.platform_default]);
  return { destination: pointed(input, d.destination), channel: pointed(input, d.channel), platform };
}

/** What the operation would do, for the rules: read from its declaration alone. */
async function intentOf(d: PolicyDeclaration, input: PolicyInput, options: PolicyCheckOptions, rules: readonly Rules[]): Promise<Intent & { ref?: string; unresolved?: boolean }> {
  const tool = typeof d.tool === 'string' ? d.tool : d.tool === undefined ? undefined : d.tool.values[pointed(input, d.tool.by) ?? ''];
  const base = { tool, alsoFor: d.also_for, writes: d.access !== 'read' };
  const ref = pointed(input, d.message_ref);
  if (ref === undefined) return { ...base, ...targetOf(d, input, options.defaults ?? {}) };
  // Looked up only where a rule looks at targets (or a confirm says what would happen): most callers have none.
  if (!rules.some((r) => targetingRule(r) !== undefined || r.confirm.size > 0)) return { ...base, ref };
  // An edit, reaction or delete of an earlier message is judged by where that original went.
  const original = await options.originalOf?.(ref);
  if (original === undefined) return { ...base, ref, unresolved: true };
  return { ...base, ref, ...targetOf(d, original, options.defaults ?? {}) };
}

/**
 * The same intent for each further item where a pointer names a list (a module's array field or
 * repeated query parameter): every channel, destination and platform named is judged, not the first alone.
 */
function othersNamed(d: PolicyDeclaration, input: PolicyInput, intent: Intent & { ref?: string }): Intent[] {
  // A call by reference is judged by where its original went.
  if (intent.ref !== undefined) return [];
  return (['channel', 'destination', 'platform'] as const).flatMap((key) => pointedAll(input, d[key]).slice(1).map((value) => ({ ...intent, [key]: value })));
}

/** The first targeting rule a call by reference must meet when its original cannot be found. */
function targetingRule(rules: Rules): PolicyRule | undefined {
  return rules.destinations !== undefined ? 'destinations' : rules.channels !== undefined ? 'channels' : rules.platforms !== undefined ? 'platforms' : undefined;
}

/**
 * The operator's policy on the API (src/infra/http/api.ts asks it for every operation it matched,
 * served by the contract's binding or by a plain route): the same rules `herald mcp` applies to its
 * tools, for every caller with the bridge token, from each operation's declaration
 * (`x-herald-policy`) alone. An operation without one is refused: nothing gets round the rules by
 * being new. The admin token's caller (the operator) is not held by it.
 */
export function policyCheck(options: PolicyCheckOptions): PolicyCheck {
  const usage = new PolicyUsage(options.db, options.now);
  const refusals = policyRefusals(options.registry);
  const confirms = new ConfirmTokens(options.confirmKey, options.db, options.now);
  const declarations = new WeakMap<object, PolicyDeclaration | null>();
  const declared = (operation: unknown): PolicyDeclaration | undefined => {
    if (typeof operation !== 'object' || operation === null) return undefined;
    let d = declarations.get(operation);
    if (d === undefined) {
      d = declarationOf(operation).declaration ?? null;
      declarations.set(operation, d);
    }
    return d ?? undefined;
  };
  const refuse = (rule: PolicyRule, retryAfterSeconds?: number): Reply => {
    refusals.inc({ rule, surface: 'http' });
    return policyReply(rule, retryAfterSeconds);
  };

  return async (ctx, operationId, operation, input) => {
    if (ctx.state['authenticated'] !== 'bridge') return undefined;
    const d = declared(operation);
    // Not declared (a contract the walk would have failed): held as the strictest, refused.
    if (d === undefined) return refuse('tools');
    const client = ctx.get(POLICY_CLIENT_HEADER) || undefined;
    // A caller speaking as an identity of its own reaches only what declares it keeps to it
    // (`speaks_as: caller`): an operation that does not say so is refused it.
    if (identityFor(options.policy, client) !== DEFAULT_IDENTITY && d.speaks_as !== 'caller') return refuse('identity');
    const subjects = rulesFor(options.policy, client).map((rules, i) => ({ rules, subject: i === 0 ? 'connector' : principalName(client) }));
    // An OAuth client the policy names no rules for: the connector's alone, plus the defaults a client gets.
    if (client !== undefined && subjects.length === 1) subjects.push({ rules: NO_RULES, subject: principalName(client) });
    const intent = await intentOf(d, input, options, subjects.map((s) => s.rules));
    for (const { rules } of subjects) {
      for (const each of [intent, ...othersNamed(d, input, intent)]) {
        const rule = refusedBy(rules, each);
        if (rule !== undefined) return refuse(rule);
      }
      if (intent.writes && intent.unresolved === true) {
        const targeting = targetingRule(rules);
        if (targeting !== undefined) return refuse(targeting);
      }
    }
    // Stored hashed: the policy runs before the input gate, and a key is the caller's text (any length, any character).
    const given = pointed(input, d.key);
    const key = given === undefined ? undefined : createHash('sha256').update(given).digest('hex');
    // A confirming second call: the first one answered a token bound to this caller, call and arguments.
    if (intent.tool !== undefined && subjects.some((s) => s.rules.confirm.has(intent.tool as string))) {
      const subject = subjects[subjects.length - 1]?.subject ?? 'connector';
      const args = argumentsHash(input);
      const token = ctx.get(CONFIRM_HEADER);
      let problem: ConfirmProblem | undefined = 'invalid';
      if (token !== '') {
        // Minted for this operation and arguments (an HTTP caller), or by herald mcp for the tool it checked the arguments of.
        // Its retry key: a retry of the confirmed call passes again; a call without one uses the token up.
        const callKey = key ?? randomBytes(16).toString('hex');
        problem = await confirms.redeem(token, { subject, what: `op:${operationId ?? ''}`, args }, callKey);
        if (problem === 'invalid') problem = await confirms.redeem(token, { subject, what: `tool:${intent.tool}` }, callKey);
      }
      if (problem !== undefined) {
        refusals.inc({ rule: 'confirm', surface: 'http' });
        const minted = confirms.mint({ subject, what: `op:${operationId ?? ''}`, args });
        const would = { operation: operationId ?? '', tool: intent.tool, access: d.access, ...defined({ destination: intent.destination, channel: intent.channel, platform: intent.platform, message_ref: intent.ref }) };
        return errorReply<'PolicyConfirmRequired'>(428, {
          error: token === '' ? 'confirmation required' : (`confirmation required: the ${CONFIRM_HEADER} token is ${problem === 'invalid' ? 'not for this call' : problem}` as never),
          confirm_token: minted.token,
          expires_at: minted.expiresAt.toISOString(),
          would,
        });
      }
    }
    // Uploads: what each subject may still hold, for the upload's own handler (it knows the size only as it streams).
    ctx.state[UPLOAD_CAPS] = subjects.map(({ rules, subject }) => ({
      subject,
      maxTotalBytes: rules.filesMaxTotalBytes ?? (subject === 'connector' ? undefined : DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES),
    }));
    // Rate caps count calls that write or read through a tool; a status poll of the same call (GET) is not a call.
    if (intent.tool === undefined || !intent.writes) return undefined;
    // Each principal counts for itself (the connector, or this OAuth client), against the strictest
    // of the caps its rules give the tool: a client never uses up the connector's count, nor another's.
    const cap = strictestCap(subjects.map((s) => s.rules.rate.get(intent.tool as string)));
    if (cap === undefined) return undefined;
    const principal = subjects[subjects.length - 1]?.subject ?? 'connector';
    const over = await usage.take(principal, intent.tool, key ?? randomBytes(16).toString('hex'), cap);
    return over === undefined ? undefined : refuse(over.rule, over.retryAfterSeconds);
  };
}

/** The keys whose value is given (the contract's optional keys are left out, never undefined). */
function defined(o: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(o).filter((e): e is [string, string] => e[1] !== undefined));
}
