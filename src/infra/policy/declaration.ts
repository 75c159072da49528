/**
 * What an operation declares for the operator's policy, beside it in the contract
 * (`x-herald-policy`, documented in openapi/herald.yaml): whether it reads, writes or administers,
 * which MCP tool it is (or which tools it serves), and where in its input its destination, channel,
 * platform, original message and retry key are. The policy engine reads nothing else about an
 * operation: an operation added later is held by the same rules as soon as it declares itself, and
 * a walk over the bundled contract (test/policy-declarations.test.ts) fails on one that does not.
 */
export interface PolicyDeclaration {
  /** `read` changes nothing; `write` changes something; `admin` changes what others rely on (a read-only rule refuses both). */
  readonly access: 'read' | 'write' | 'admin';
  /** The tool this operation is: a name, or by a value of its input (e.g. a send's kind). */
  readonly tool?: string | { readonly by: string; readonly values: Readonly<Record<string, string>> };
  /** Other tools that call it (a sending tool polls its outcome): any of them on lets it through. */
  readonly also_for?: readonly string[];
  /** JSON pointers into the input (`/body/...`, `/query/...`, `/path/...`). */
  readonly destination?: string;
  readonly channel?: string;
  readonly platform?: string;
  /** Where the input names no platform: the default the wiring supplies under this name. */
  readonly platform_default?: string;
  /** A reference to an earlier send: the targeting rules apply to where that original went. */
  readonly message_ref?: string;
  /** The call's own retry key: a retry is counted once against a rate cap. */
  readonly key?: string;
  /**
   * `caller`: the operation keeps to the identity its caller speaks as (it sends as it, or finds only
   * what is that identity's). A caller bound to an identity other than `default` may call only such
   * operations: any other is refused it, so an operation added later fails closed.
   */
  readonly speaks_as?: 'caller';
}

/** The extension's name in the contract. */
export const POLICY_EXTENSION = 'x-herald-policy';

/** The input a pointer reads: the JSON body, the declared query parameters, the path parameters. */
export interface PolicyInput {
  readonly body?: unknown;
  readonly query?: Readonly<Record<string, unknown>>;
  readonly path?: Readonly<Record<string, unknown>>;
}

const KEYS = new Set(['access', 'tool', 'also_for', 'destination', 'channel', 'platform', 'platform_default', 'message_ref', 'key', 'speaks_as']);
const POINTERS = ['destination', 'channel', 'platform', 'message_ref', 'key'] as const;
const POINTER = /^\/(body|query|path)(\/[^/]+)*$/;

/**
 * The operation's declaration, checked: undefined with the problems said when it has none or a
 * malformed one. `tools`: the MCP tools that exist (a declaration naming another is a typo).
 */
export function declarationOf(operation: unknown, tools?: ReadonlySet<string>): { declaration?: PolicyDeclaration; problems: string[] } {
  const raw = typeof operation === 'object' && operation !== null ? (operation as Record<string, unknown>)[POLICY_EXTENSION] : undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { problems: [`no ${POLICY_EXTENSION}`] };
  const d = raw as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(d)) if (!KEYS.has(key)) problems.push(`unknown key ${key}`);
  if (d['access'] !== 'read' && d['access'] !== 'write' && d['access'] !== 'admin') problems.push('access must be read, write or admin');
  const named: string[] = [];
  const tool = d['tool'];
  if (typeof tool === 'string') named.push(tool);
  else if (typeof tool === 'object' && tool !== null) {
    const { by, values } = tool as { by?: unknown; values?: unknown };
    if (typeof by !== 'string' || !POINTER.test(by)) problems.push('tool.by must be a pointer into /body, /query or /path');
    if (typeof values !== 'object' || values === null || Object.values(values).some((v) => typeof v !== 'string')) problems.push('tool.values must map input values to tool names');
    else named.push(...(Object.values(values) as string[]));
  } else if (tool !== undefined) problems.push('tool must be a tool name or { by, values }');
  const also = d['also_for'];
  if (also !== undefined) {
    if (!Array.isArray(also) || also.length === 0 || also.some((t) => typeof t !== 'string')) problems.push('also_for must list tool names');
    else named.push(...(also as string[]));
  }
  for (const key of POINTERS) {
    const v = d[key];
    if (v !== undefined && (typeof v !== 'string' || !POINTER.test(v))) problems.push(`${key} must be a pointer into /body, /query or /path`);
  }
  if (d['platform_default'] !== undefined && (typeof d['platform_default'] !== 'string' || d['platform'] === undefined)) problems.push('platform_default needs platform, and names a default');
  if (d['speaks_as'] !== undefined && d['speaks_as'] !== 'caller') problems.push('speaks_as must be caller');
  if (tools !== undefined) for (const t of named) if (!tools.has(t)) problems.push(`no tool is called ${t}`);
  return problems.length > 0 ? { problems } : { declaration: d as unknown as PolicyDeclaration, problems };
}

/** Every tool a declaration names (its own, by any value, and those it serves). */
export function toolsNamed(declaration: PolicyDeclaration): string[] {
  const own = declaration.tool === undefined ? [] : typeof declaration.tool === 'string' ? [declaration.tool] : Object.values(declaration.tool.values);
  return [...own, ...(declaration.also_for ?? [])];
}

/** The string a pointer names in the input, if it names one (of a list, its first). */
export function pointed(input: PolicyInput, pointer: string | undefined): string | undefined {
  return pointedAll(input, pointer)[0];
}

/** Every string a pointer names in the input: one, each of a list (a repeated query parameter, an array field), or none. */
export function pointedAll(input: PolicyInput, pointer: string | undefined): string[] {
  if (pointer === undefined) return [];
  let at: unknown = input;
  for (const part of pointer.slice(1).split('/')) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof at !== 'object' || at === null || Array.isArray(at)) return [];
    at = Object.prototype.hasOwnProperty.call(at, key) ? (at as Record<string, unknown>)[key] : undefined;
  }
  return (Array.isArray(at) ? at : [at]).filter((v): v is string => typeof v === 'string');
}
