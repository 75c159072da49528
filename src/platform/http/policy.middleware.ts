import { randomBytes } from 'node:crypto';
import type { Context as KoaContext } from 'koa';
import { Counter, type Registry } from 'prom-client';
import { refusedBy, rulesFor, type Intent, type Policy, type PolicyRule } from '../policy/policy.js';
import { PolicyUsage } from '../policy/usage.js';
import type { Kysely } from 'kysely';
import { errorReply, type Reply } from './reply.js';

/**
 * The header `herald mcp` names an OAuth client by, so that client's rules hold on the bridge too.
 * Trusted only from the bridge token's caller, and only ever adds rules: the connector's always hold.
 */
export const POLICY_CLIENT_HEADER = 'x-herald-policy-client';

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

/** A policy refusal as the contract words it (PolicyRefused). */
export function policyReply(rule: PolicyRule, retryAfterSeconds?: number): Reply {
  return errorReply<'PolicyRefused'>(403, { error: `refused by policy: ${rule}` as never }, retryAfterSeconds === undefined ? undefined : { 'Retry-After': String(retryAfterSeconds) });
}

export interface PolicyCheckOptions {
  policy: Policy;
  db: Kysely<unknown>;
  registry: Registry;
  /** What an operation would do, for the rules (the wiring gives the table of operations and their tools). */
  intentOf(operationId: string | undefined, input: { method: string; body: unknown; query: Readonly<Record<string, unknown>> }): Intent;
  /** The key a call is counted under against a rate cap (a retry of the same request counts once). */
  usageKey(body: unknown): string | undefined;
  now?: () => number;
}

/** What the API asks before handling an operation: undefined to go ahead, or the refusal. */
export type PolicyCheck = (ctx: KoaContext, operationId: string | undefined, body: unknown, query: Readonly<Record<string, unknown>>) => Promise<Reply | undefined>;

/**
 * The operator's policy on the API (hooked into src/platform/http/api.ts after the body is read):
 * the same rules `herald mcp` applies to its tools, on the operations those tools call, for every
 * caller with the bridge token. The admin token's caller (the operator) is not held by it.
 */
export function policyCheck(options: PolicyCheckOptions): PolicyCheck {
  const usage = new PolicyUsage(options.db, options.now);
  const refusals = policyRefusals(options.registry);
  return async (ctx, operationId, body, query) => {
    if (ctx.state['authenticated'] !== 'bridge') return undefined;
    const client = ctx.get(POLICY_CLIENT_HEADER) || undefined;
    const intent = options.intentOf(operationId, { method: ctx.method, body, query });
    const subjects = rulesFor(options.policy, client).map((rules, i) => ({ rules, subject: i === 0 ? 'connector' : `client:${client ?? ''}` }));
    for (const { rules } of subjects) {
      const rule = refusedBy(rules, intent);
      if (rule !== undefined) {
        refusals.inc({ rule, surface: 'http' });
        return policyReply(rule);
      }
    }
    // Rate caps count calls that write or read through a tool; a status poll of the same call (GET) is not a call.
    if (intent.tool === undefined || !intent.writes) return undefined;
    const key = options.usageKey(body) ?? randomBytes(16).toString('hex');
    for (const { rules, subject } of subjects) {
      const cap = rules.rate.get(intent.tool);
      if (cap === undefined) continue;
      const over = await usage.take(subject, intent.tool, key, cap);
      if (over !== undefined) {
        refusals.inc({ rule: over.rule, surface: 'http' });
        return policyReply(over.rule, over.retryAfterSeconds);
      }
    }
    return undefined;
  };
}
