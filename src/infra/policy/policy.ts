import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import type { Node } from 'yaml';
import { StartupError } from '../startup.js';
import { DEFAULT_IDENTITY, IDENTITY_NAME } from './identity.js';

/**
 * The operator's policy (HERALD_POLICY, one YAML file): what the connector (whoever holds
 * MCP_BRIDGE_TOKEN) and each OAuth client of `herald mcp --http` may do. Checked twice, with the
 * same rules: by `herald mcp` before a tool runs (src/mcp/), and by the API on the `/mcp/`
 * operations the tools call (src/infra/http/policy.middleware.ts), so calling `/mcp/` directly
 * does not get round it. No file: no rules, today's behaviour.
 */
export interface Rules {
  /** Only tools that change nothing (readOnlyHint), and only GET operations. */
  readonly readOnly: boolean;
  /** Only these tools (and the operations they call); undefined: every tool. */
  readonly tools: ReadonlySet<string> | undefined;
  /** Posts may target only these destinations; undefined: any. */
  readonly destinations: ReadonlySet<string> | undefined;
  /** Writes may target only these channels; undefined: any. */
  readonly channels: ReadonlySet<string> | undefined;
  /** Writes may use only these platforms; undefined: any. */
  readonly platforms: ReadonlySet<string> | undefined;
  /** Calls per tool per minute and per day. */
  readonly rate: ReadonlyMap<string, { perMinute?: number; perDay?: number }>;
  /** Tools that run only on a second call that carries the confirm token the first call answered. */
  readonly confirm: ReadonlySet<string>;
  /** The most bytes of files this caller's uploads may hold in the store at once; undefined: no cap of its own. */
  readonly filesMaxTotalBytes?: number | undefined;
  /** The identity this caller speaks as (identity.ts); undefined: the connector's, else `default`. */
  readonly identity?: string | undefined;
}

export interface Policy {
  /** The connector's rules: every caller with the bridge token. */
  readonly connector: Rules;
  /** An OAuth client's rules, by its client id, applied on top of the connector's. */
  readonly clients: ReadonlyMap<string, Rules>;
  /** Where the file is (for messages). */
  readonly file: string;
}

/** The rule a refusal names (the contract's `refused by policy: <rule>`; the metric's `rule` label). */
export type PolicyRule = 'read_only' | 'tools' | 'destinations' | 'channels' | 'platforms' | 'rate_per_minute' | 'rate_per_day' | 'confirm' | 'scope' | 'files' | 'identity';

/** The policy file's problems, every one with its line, as the configuration's are listed. */
export class PolicyError extends StartupError {
  constructor(
    readonly file: string,
    readonly problems: readonly string[],
  ) {
    super(`invalid policy in HERALD_POLICY (${file}):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'PolicyError';
  }
}

const RULE_KEYS = ['read_only', 'tools', 'destinations', 'channels', 'platforms', 'rate', 'confirm', 'files', 'identity'] as const;

/**
 * An OAuth client's upload cap when the policy gives it none (100 MiB: four files of the largest
 * size one message carries on the platforms): a remote client cannot fill the operator's disk by default.
 */
export const DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES = 104_857_600;

/**
 * Reads and checks the policy file; every problem is listed at once (PolicyError). `toolNames`:
 * the tools that exist (a rule naming another is a typo); `platforms` likewise.
 */
export async function loadPolicy(file: string, known: Known): Promise<Policy> {
  let source: string;
  try {
    source = await readFile(file, 'utf8');
  } catch (err) {
    throw new PolicyError(file, [`cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`]);
  }
  return parsePolicy(source, file, known);
}

/**
 * The YAML parser, loaded at the first policy parsed (synchronously, as parsePolicy is): a Herald
 * without HERALD_POLICY never holds its code in memory.
 */
let yamlModule: typeof Yaml | undefined;
const yaml = (): typeof Yaml => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof Yaml);

/**
 * What a policy may name: the tools and platforms that exist, and the identities the platforms are
 * configured with (undefined: not known here, as in `herald mcp`: any well-formed name passes).
 */
export interface Known {
  readonly tools: readonly string[];
  readonly platforms: readonly string[];
  readonly identities?: readonly string[] | undefined;
}

/** Parses a policy's text (loadPolicy's work, without the file). */
export function parsePolicy(source: string, file: string, known: Known): Policy {
  const { isMap, isScalar, isSeq, LineCounter, parseDocument } = yaml();
  const problems: string[] = [];
  const lines = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lines, uniqueKeys: true });
  const at = (node: Node | null | undefined): string => {
    const offset = node?.range?.[0];
    return offset === undefined ? '' : `line ${lines.linePos(offset).line}: `;
  };
  for (const e of doc.errors) problems.push(`line ${e.linePos?.[0].line ?? '?'}: ${e.message.split('\n')[0]}`);
  if (problems.length > 0) throw new PolicyError(file, problems);
  const root = doc.contents;
  const empty = NO_RULES;
  if (root === null || (isScalar(root) && root.value === null)) return { connector: empty, clients: new Map(), file };
  if (!isMap(root)) throw new PolicyError(file, [`${at(root)}the policy must be a mapping with connector and/or clients`]);

  const toolSet = new Set(known.tools);
  const names = (node: unknown, where: string, check?: (v: string) => string | undefined): Set<string> | undefined => {
    if (!isSeq(node)) {
      problems.push(`${at(node as Node)}${where} must be a list`);
      return undefined;
    }
    const out = new Set<string>();
    for (const item of node.items) {
      if (!isScalar(item) || typeof item.value !== 'string' || item.value === '') {
        problems.push(`${at(item as Node)}${where} must list non-empty names`);
        continue;
      }
      const bad = check?.(item.value);
      if (bad !== undefined) problems.push(`${at(item)}${where}: ${bad}`);
      else out.add(item.value);
    }
    return out;
  };
  const toolName = (v: string): string | undefined => (toolSet.has(v) ? undefined : `no tool is called ${v} (the tools: ${known.tools.join(', ')})`);
  const count = (node: unknown, where: string): number | undefined => {
    if (node === undefined) return undefined;
    const v = isScalar(node) ? node.value : undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
      problems.push(`${at(node as Node)}${where} must be a whole number, 0 or more`);
      return undefined;
    }
    return v;
  };

  const rules = (node: unknown, where: string): Rules => {
    if (!isMap(node)) {
      problems.push(`${at(node as Node)}${where} must be a mapping of rules (${RULE_KEYS.join(', ')})`);
      return empty;
    }
    let readOnly = false;
    let tools: Set<string> | undefined;
    let destinations: Set<string> | undefined;
    let channels: Set<string> | undefined;
    let platforms: Set<string> | undefined;
    const rate = new Map<string, { perMinute?: number; perDay?: number }>();
    let confirm = new Set<string>();
    let filesMaxTotalBytes: number | undefined;
    let identity: string | undefined;
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      const value = pair.value;
      switch (key) {
        case 'read_only':
          if (!isScalar(value) || typeof value.value !== 'boolean') problems.push(`${at(value as Node)}${where}.read_only must be true or false`);
          else readOnly = value.value;
          break;
        case 'tools':
          tools = names(value, `${where}.tools`, toolName);
          break;
        case 'destinations':
          destinations = names(value, `${where}.destinations`);
          break;
        case 'channels':
          channels = names(value, `${where}.channels`);
          if (channels !== undefined) channels = new Set([...channels].map(channelKey));
          break;
        case 'platforms':
          platforms = names(value, `${where}.platforms`, (v) => (known.platforms.includes(v) ? undefined : `no platform is called ${v} (the platforms: ${known.platforms.join(', ')})`));
          break;
        case 'confirm':
          confirm = names(value, `${where}.confirm`, toolName) ?? new Set();
          break;
        case 'identity': {
          const name = isScalar(value) && typeof value.value === 'string' ? value.value : undefined;
          if (name === undefined || !IDENTITY_NAME.test(name)) problems.push(`${at(value as Node)}${where}.identity must be an identity's name (a lowercase letter, then up to 31 lowercase letters, digits or -)`);
          else if (known.identities !== undefined && name !== DEFAULT_IDENTITY && !known.identities.includes(name))
            problems.push(`${at(value as Node)}${where}.identity: no platform has an identity called ${name} (the identities: ${[DEFAULT_IDENTITY, ...known.identities].join(', ')})`);
          else identity = name;
          break;
        }
        case 'files':
          if (!isMap(value)) {
            problems.push(`${at(value as Node)}${where}.files must be { max_total_bytes }`);
            break;
          }
          for (const f of value.items) {
            const k = isScalar(f.key) ? String(f.key.value) : '';
            if (k === 'max_total_bytes') filesMaxTotalBytes = count(f.value, `${where}.files.max_total_bytes`);
            else problems.push(`${at(f.key as Node)}${where}.files: unknown key ${k} (max_total_bytes)`);
          }
          break;
        case 'rate':
          if (!isMap(value)) {
            problems.push(`${at(value as Node)}${where}.rate must map tool names to { per_minute, per_day }`);
            break;
          }
          for (const entry of value.items) {
            const tool = isScalar(entry.key) ? String(entry.key.value) : '';
            const bad = toolName(tool);
            if (bad !== undefined) {
              problems.push(`${at(entry.key as Node)}${where}.rate: ${bad}`);
              continue;
            }
            if (!isMap(entry.value)) {
              problems.push(`${at(entry.value as Node)}${where}.rate.${tool} must be { per_minute, per_day }`);
              continue;
            }
            const cap: { perMinute?: number; perDay?: number } = {};
            for (const c of entry.value.items) {
              const k = isScalar(c.key) ? String(c.key.value) : '';
              const n = k === 'per_minute' || k === 'per_day' ? count(c.value, `${where}.rate.${tool}.${k}`) : undefined;
              if (k === 'per_minute' && n !== undefined) cap.perMinute = n;
              else if (k === 'per_day' && n !== undefined) cap.perDay = n;
              else if (k !== 'per_minute' && k !== 'per_day') problems.push(`${at(c.key as Node)}${where}.rate.${tool}: unknown key ${k} (per_minute, per_day)`);
            }
            rate.set(tool, cap);
          }
          break;
        default:
          problems.push(`${at(pair.key as Node)}${where}: unknown rule ${key} (the rules: ${RULE_KEYS.join(', ')})`);
      }
    }
    return { readOnly, tools, destinations, channels, platforms, rate, confirm, filesMaxTotalBytes, identity };
  };

  let connector = empty;
  const clients = new Map<string, Rules>();
  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : '';
    if (key === 'connector') connector = rules(pair.value, 'connector');
    else if (key === 'clients') {
      if (!isMap(pair.value)) {
        problems.push(`${at(pair.value as Node)}clients must map OAuth client ids to rules`);
        continue;
      }
      for (const c of pair.value.items) {
        const id = isScalar(c.key) ? String(c.key.value) : '';
        clients.set(id, rules(c.value, `clients.${id}`));
      }
    } else problems.push(`${at(pair.key as Node)}unknown section ${key} (the sections: connector, clients)`);
  }
  if (problems.length > 0) throw new PolicyError(file, problems);
  return { connector, clients, file };
}

/** A channel as rules compare it: a leading `#` left out, in lower case. */
export function channelKey(channel: string): string {
  return channel.replace(/^#/, '').toLowerCase();
}

/**
 * What a call would do, as far as the rules look: which tool, whether it writes, and where. For an
 * operation it comes from the operation's declaration alone (declaration.ts); for a tool, from the tool.
 */
export interface Intent {
  /** The tool it is; undefined for an operation that is no tool of its own (it may serve others: alsoFor). */
  tool: string | undefined;
  /** Other tools that call this operation too (a sending tool polls its outcome): any of them on lets it through. */
  alsoFor?: readonly string[] | undefined;
  writes: boolean;
  destination?: string | undefined;
  channel?: string | undefined;
  platform?: string | undefined;
}

/**
 * The first rule (besides rates, which need the count) that refuses the intent, if any. The target
 * rules hold on reads that name a place too (reading a channel's messages or members, listing a
 * platform's channels): a caller kept out of a channel's inbox events must not read it another way.
 */
export function refusedBy(rules: Rules, intent: Intent): PolicyRule | undefined {
  if (rules.readOnly && intent.writes) return 'read_only';
  // An operation that belongs to no tool on the list is off: one no tool names is off under any tools rule.
  if (rules.tools !== undefined && ![intent.tool, ...(intent.alsoFor ?? [])].some((t) => t !== undefined && rules.tools?.has(t) === true)) return 'tools';
  if (rules.destinations !== undefined && intent.destination !== undefined && !rules.destinations.has(intent.destination)) return 'destinations';
  if (rules.channels !== undefined && intent.channel !== undefined && !rules.channels.has(channelKey(intent.channel))) return 'channels';
  if (rules.platforms !== undefined && intent.platform !== undefined && !rules.platforms.has(intent.platform)) return 'platforms';
  return undefined;
}

/** No rules: every tool, every target, no caps. */
export const NO_RULES: Rules = { readOnly: false, tools: undefined, destinations: undefined, channels: undefined, platforms: undefined, rate: new Map(), confirm: new Set() };

/** No policy file: the connector and every client have no rules of their own (an OAuth client's defaults still hold). */
export const NO_POLICY: Policy = { connector: NO_RULES, clients: new Map(), file: '' };

/** The identity a caller speaks as: its OAuth client's binding, else the connector's, else `default`. */
export function identityFor(policy: Policy, client: string | undefined): string {
  const own = client === undefined ? undefined : policy.clients.get(client);
  return own?.identity ?? policy.connector.identity ?? DEFAULT_IDENTITY;
}

/** The rules that hold for a caller: the connector's, and the OAuth client's on top (both must allow). */
export function rulesFor(policy: Policy, client: string | undefined): Rules[] {
  const own = client === undefined ? undefined : policy.clients.get(client);
  return own === undefined ? [policy.connector] : [policy.connector, own];
}
