import type { CallToolResult } from '@modelcontextprotocol/server';
import type { Config } from '../config-types.js';
import { text, type McpTool } from '../infra/mcp/tool.js';
import { argumentsHash, ConfirmTokens } from '../infra/policy/confirm.js';
import { loadPolicy, refusedBy, rulesFor, type Policy, type PolicyRule, type Rules } from '../infra/policy/policy.js';
import { DEFAULT_IDENTITY } from '../infra/policy/identity.js';
import { principalName } from '../infra/policy/principal.js';
import { strictestCap } from '../infra/policy/usage.js';
import { PLATFORM_NAMES } from '../platforms/platforms.js';
import type { McpServerDeps } from './deps.js';
import { mcpTools } from './tools.js';

type Tool = McpTool<McpServerDeps>;

/**
 * The operator's policy file (HERALD_POLICY), checked against the tools and platforms that exist
 * and, where they are known (`herald serve`), the identities the platforms are configured with;
 * undefined without one.
 */
export async function loadOperatorPolicy(config: Pick<Config, 'policyPath'>, identities?: readonly string[]): Promise<Policy | undefined> {
  if (config.policyPath === undefined) return undefined;
  return loadPolicy(config.policyPath, { tools: mcpTools().map((t) => t.name), platforms: PLATFORM_NAMES, identities });
}

/** OAuth scopes and what each lets a token do (src/mcp/oauth.ts): read-only tools, writes, destructive ones. */
export type Scope = 'read' | 'write' | 'admin';

/** The scope a tool needs: `read` for a read-only tool, `admin` for a destructive one, `write` for the rest. */
export function scopeOf(tool: Tool): Scope {
  return tool.annotations.readOnlyHint ? 'read' : tool.annotations.destructiveHint ? 'admin' : 'write';
}

/** Who is calling `herald mcp`: the static token's caller, or an OAuth client with its scopes. */
export interface Caller {
  /** The OAuth client id; undefined for the static token (the connector's rules alone). */
  client?: string | undefined;
  /** An OAuth token's scopes; undefined for the static token (every tool). */
  scopes?: ReadonlySet<string> | undefined;
}

/** A refusal an agent reads: which rule of whose policy refused. */
function refusal(rule: PolicyRule, tool: string, detail: string): CallToolResult {
  return text(`Refused by the operator's policy (rule ${rule}): ${detail} (${tool}).`, true);
}

const RULE_WORDS: Readonly<Record<string, string>> = {
  read_only: 'this connector is read-only: only tools that change nothing are on',
  tools: 'this tool is off for this connector',
};

const DAY_MS = 86_400_000;
/** How often the read counts drop every principal's calls a day old (on a call, not on a timer). */
const SWEEP_EVERY_MS = 600_000;

/**
 * Read-only caps counted here (in memory: reads never reach a counted bridge operation), per
 * principal and tool. Principals come and go (OAuth clients an issuer mints): one that calls no more
 * is forgotten once its calls are a day old, so the counts hold about a day of calls.
 */
export class ReadCounter {
  private readonly calls = new Map<string, number[]>();
  private sweptAt = Number.NaN;

  /** How many principal-and-tool counts are held. */
  get size(): number {
    return this.calls.size;
  }

  take(key: string, cap: { perMinute?: number; perDay?: number }, now: number): PolicyRule | undefined {
    if (!(now - this.sweptAt < SWEEP_EVERY_MS)) {
      this.sweptAt = now;
      for (const [k, times] of this.calls) if (times.every((t) => now - t >= DAY_MS)) this.calls.delete(k);
    }
    const kept = (this.calls.get(key) ?? []).filter((t) => now - t < DAY_MS);
    const minute = kept.filter((t) => now - t < 60_000).length;
    if (cap.perDay !== undefined && kept.length >= cap.perDay) return 'rate_per_day';
    if (cap.perMinute !== undefined && minute >= cap.perMinute) return 'rate_per_minute';
    kept.push(now);
    this.calls.set(key, kept);
    return undefined;
  }
}

/**
 * The policy as `herald mcp` applies it to a caller: which tools it lists, whether a call may run.
 * Targets (destinations, channels, platforms) and write caps are held by Herald itself on the
 * operations the tools call (src/infra/http/policy.middleware.ts), whose refusal the tool reports.
 */
export class McpPolicy {
  private readonly reads = new ReadCounter();

  private readonly confirms: ConfirmTokens | undefined;

  /** `confirmKey`: what confirm tokens are signed with (confirmKey of the bridge token, as Herald signs them). */
  constructor(
    private readonly policy: Policy | undefined,
    private readonly onRefusal: (rule: PolicyRule) => void = () => undefined,
    confirmKey?: Buffer,
  ) {
    this.confirms = confirmKey === undefined ? undefined : new ConfirmTokens(confirmKey, undefined);
  }

  private rules(caller: Caller): Rules[] {
    return this.policy === undefined ? [] : rulesFor(this.policy, caller.client);
  }

  /** Whether the caller may use the tool at all (scope, read-only, tools on): an off tool is not listed. */
  private off(tool: Tool, caller: Caller): PolicyRule | undefined {
    if (caller.scopes !== undefined && !grants(caller.scopes, scopeOf(tool))) return 'scope';
    for (const rules of this.rules(caller)) {
      const rule = refusedBy(rules, { tool: tool.name, writes: !tool.annotations.readOnlyHint });
      if (rule !== undefined) return rule;
    }
    return undefined;
  }

  /** Whether the caller must confirm the tool: a second call with the `confirm_token` the first one answered. */
  needsConfirm(tool: Tool, caller: Caller): boolean {
    return this.rules(caller).some((r) => r.confirm.has(tool.name));
  }

  /**
   * Whether the caller's calls may go with the admin token (herald mcp given HERALD_ADMIN_TOKEN):
   * only a caller with no targets and no caps of its own, since Herald holds those on the bridge
   * token's calls alone. A caller kept to some channels, destinations or platforms, or counted,
   * calls the admin tier's operations with the bridge token, and Herald's policy judges them. So
   * does a caller bound to an identity of its own: the admin token sees every identity's records.
   */
  adminTier(caller: Caller): boolean {
    return this.rules(caller).every(
      (r) => r.destinations === undefined && r.channels === undefined && r.platforms === undefined && r.rate.size === 0 && r.filesMaxTotalBytes === undefined && (r.identity === undefined || r.identity === DEFAULT_IDENTITY),
    );
  }

  listed(tool: Tool, caller: Caller): boolean {
    return this.off(tool, caller) === undefined;
  }

  /**
   * Undefined (or the confirm token to forward) to go ahead, else the answer the agent reads.
   * `args`: the call's arguments without `confirm_token`; `confirmToken`: the one it carried.
   */
  check(tool: Tool, caller: Caller, args: Record<string, unknown> = {}, confirmToken?: string): CallToolResult | { confirmed: string } | undefined {
    const off = this.off(tool, caller);
    if (off !== undefined) {
      this.onRefusal(off);
      if (off === 'scope') return refusal('scope', tool.name, `the access token lacks the ${scopeOf(tool)} scope this tool needs`);
      return refusal(off, tool.name, RULE_WORDS[off] ?? 'not allowed');
    }
    let confirmed: { confirmed: string } | undefined;
    if (this.needsConfirm(tool, caller)) {
      const binding = { subject: principalName(caller.client), what: `tool:${tool.name}`, args: argumentsHash(args) };
      const checked = confirmToken === undefined || this.confirms === undefined ? undefined : this.confirms.verify(confirmToken, binding);
      if (checked === undefined || 'problem' in checked) {
        this.onRefusal('confirm');
        const minted = this.confirms?.mint(binding);
        const why = checked === undefined ? '' : ` The confirm_token given is ${checked.problem === 'invalid' ? 'not for this call (another tool, caller or arguments)' : checked.problem}.`;
        return text(
          `Not done yet: the operator's policy asks for a second, confirming call (rule confirm).${why} This call would run ${tool.name} with ${JSON.stringify(args)}. ` +
            (minted === undefined ? 'This server cannot confirm calls.' : `To go ahead, call ${tool.name} again with the same arguments and confirm_token: "${minted.token}" (good once, until ${minted.expiresAt.toISOString()}).`),
          true,
        );
      }
      confirmed = { confirmed: confirmToken as string };
    }
    if (tool.annotations.readOnlyHint) {
      // Each principal counts for itself (the connector, or this OAuth client, listed in the policy or not), against the strictest cap.
      const cap = strictestCap(this.rules(caller).map((rules) => rules.rate.get(tool.name)));
      const over = cap === undefined ? undefined : this.reads.take(`${principalName(caller.client)}:${tool.name}`, cap, Date.now());
      if (over !== undefined) {
        this.onRefusal(over);
        return refusal(over, tool.name, `this tool's cap is used up (${over === 'rate_per_minute' ? `${cap?.perMinute} a minute` : `${cap?.perDay} a day`})`);
      }
    }
    return confirmed;
  }
}

/** Scopes grant in tiers: admin includes write, write includes read. */
function grants(scopes: ReadonlySet<string>, needed: Scope): boolean {
  if (scopes.has('admin')) return true;
  if (needed === 'admin') return false;
  if (scopes.has('write')) return true;
  return needed === 'read' && scopes.has('read');
}
