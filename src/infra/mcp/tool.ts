import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/server';
import { dereferenced, loadSpec, type OpenApiDocument } from '../contract/spec.js';

/**
 * A call's outcome: the protocol's answer as data, never a thrown string. `status` 0 means the
 * bridge could not be reached (after the retries): `url` is where it was looked for, `cause` what
 * the network said (e.g. `connect ECONNREFUSED 127.0.0.1:8787`).
 */
export type BridgeResult<T> = { ok: true; status: number; data: T } | { ok: false; status: number; error: string; body?: unknown; url?: string; cause?: string };

/** A JSON Schema for a tool's input, built from the contract's own schemas. */
export type JsonSchema = Record<string, unknown>;

/**
 * One MCP tool: its name, its input schema (from the contract) and its handler, in one entry, so
 * the tool list and its dispatch cannot drift. `Deps` is what the MCP server hands every handler.
 */
export interface McpTool<Deps> {
  readonly name: string;
  readonly description: string;
  /** A short name people read (MCP's `title`). */
  readonly title: string;
  /**
   * What the tool does to the world (MCP's hints), each said: read-only, destructive, idempotent
   * (the same arguments again change nothing more), open-world (it reaches a platform or the web).
   */
  readonly annotations: Required<Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>>;
  /**
   * The contract's schema (openapi/) its `structuredContent` is valid against: a component schema's
   * name, or an operationId (its success response's schema). Published as the tool's `outputSchema`.
   */
  readonly output: string;
  /** The module's own contract (src/modules/contract.ts `contract`) where `output` is, when it is not in the bundle. */
  readonly contract?: OpenApiDocument;
  /**
   * How a second identical call is told from the first; every tool that is not read-only says
   * (test/mcp-replay.test.ts walks them). `key`: the argument naming the call: the same value again
   * sends nothing new, and the answer's `replayed` (text and structuredContent) says so. `natural`:
   * why the same call again changes nothing more, so it needs no key.
   */
  readonly replay?: { readonly key: string } | { readonly natural: string };
  /**
   * The contract's operations (operationIds) this tool calls: each must name the tool in its
   * `x-herald-policy` (as its tool or in `also_for`), so the operator's rules that let the tool
   * run let its calls through, and none other (test/policy-declarations.test.ts walks them).
   */
  readonly operations: readonly string[];
  readonly inputSchema: JsonSchema & { type: 'object' };
  handler(args: Record<string, unknown>, deps: Deps): Promise<CallToolResult>;
}

/** A tool's answer in plain words. */
export const text = (t: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });

/**
 * A successful answer: the words an agent reads, and the same answer as data (`structuredContent`),
 * valid against the tool's `output` schema (the bridge's own response, as the contract has it).
 */
export const result = (t: string, data: unknown): CallToolResult => ({ content: [{ type: 'text', text: t }], structuredContent: data as Record<string, unknown> });

/**
 * A write tool's answer marked with whether this call repeated an earlier one (its `replay` key,
 * `key`=`value`, seen before): `replayed` in its data, and in its words first when it did.
 */
export function replayMarked(r: CallToolResult, replayed: boolean, key: string, value: string): CallToolResult {
  const words = r.content.map((c, i) => (i === 0 && c.type === 'text' && replayed ? { ...c, text: `Replayed (${key} ${value} was used before): this call sent nothing new.\n${c.text}` } : c));
  return { ...r, content: words, ...(r.structuredContent !== undefined ? { structuredContent: { ...r.structuredContent, replayed } } : {}) };
}

/** A successful answer whose text is the data itself, as JSON. */
export const json = (data: unknown): CallToolResult => result(JSON.stringify(data, null, 2), data);

/** The four hints, each said (MCP's defaults assume the worst; Herald says what is true). */
export const hints = (readOnly: boolean, destructive: boolean, idempotent: boolean, openWorld: boolean): McpTool<unknown>['annotations'] => ({
  readOnlyHint: readOnly,
  destructiveHint: destructive,
  idempotentHint: idempotent,
  openWorldHint: openWorld,
});

/** An input object of exactly these properties. */
export const object = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema & { type: 'object' } => ({
  type: 'object',
  properties,
  ...(required.length > 0 ? { required } : {}),
  additionalProperties: false,
});

/** A contract's dereferenced schemas and success responses, read once per document. */
interface Resolved {
  readonly schemas: Record<string, unknown>;
  readonly responses: Map<string, JsonSchema>;
}

const resolved = new WeakMap<OpenApiDocument, Resolved>();

/**
 * The contract's component schemas and each operation's success (2xx) JSON response schema, by
 * operationId: the bundle's (generated/openapi.json), or a module's own document (its tools name
 * what it declares there).
 */
function resolve(document: OpenApiDocument = loadSpec().document): Resolved {
  let r = resolved.get(document);
  if (r === undefined) {
    const doc = dereferenced(document) as { components?: { schemas?: Record<string, unknown> }; paths?: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: JsonSchema }> }> }>> };
    const responses = new Map<string, JsonSchema>();
    for (const item of Object.values(doc.paths ?? {})) {
      for (const op of Object.values(item)) {
        if (typeof op !== 'object' || op === null || op.operationId === undefined) continue;
        const ok = Object.entries(op.responses ?? {}).find(([status, res]) => status.startsWith('2') && res.content?.['application/json']?.schema !== undefined);
        const schema = ok?.[1].content?.['application/json']?.schema;
        if (schema !== undefined) responses.set(op.operationId, schema);
      }
    }
    r = { schemas: doc.components?.schemas ?? {}, responses };
    resolved.set(document, r);
  }
  return r;
}

/**
 * A tool's output schema: the contract's component schema `name`, or else the success response of
 * the operation `name`, without Herald's `x-` extensions, its root an object (as MCP requires).
 * `document`: a module's own contract, where its tool's schemas are (default: the bundle).
 */
export function contractOutput(name: string, document?: OpenApiDocument): JsonSchema & { type: 'object' } {
  const { schemas, responses } = resolve(document);
  const schema = schemas[name] !== undefined ? contractSchema(name, undefined, document) : (stripExtensions(responses.get(name)) as JsonSchema | undefined);
  if (schema === undefined) throw new Error(`the contract has no schema or operation ${name}`);
  return { ...schema, type: 'object' };
}

/** A copy without Herald's `x-` extensions: the dereferenced document is shared, never changed. */
function stripExtensions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(stripExtensions);
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) if (!k.startsWith('x-')) out[k] = stripExtensions(v);
  return out;
}

/**
 * The contract's component schema `name`, with `$ref`s resolved (their siblings kept, as the API
 * reads them: a field's own description) and Herald's `x-` extensions dropped: tool inputs take
 * exactly the limits the bridge enforces, written once in openapi/.
 */
export function contractSchema(name: string, description?: string, document?: OpenApiDocument): JsonSchema {
  const schema = stripExtensions(resolve(document).schemas[name]) as JsonSchema | undefined;
  if (schema === undefined) throw new Error(`the contract has no schema ${name}`);
  return description !== undefined ? { ...schema, description } : schema;
}

/**
 * Herald not answering, in words the person setting the agent up can act on: where this MCP
 * server looked, what the network said, and how to point it elsewhere.
 */
export function unreachable(r: BridgeResult<unknown> & { ok: false }): string {
  return (
    `Herald could not be reached at ${r.url ?? 'HERALD_URL'} (${r.cause ?? 'no answer'}). ` +
    'If it is not running, start it (npm start in the Herald folder); if it runs elsewhere, set HERALD_URL for this MCP server to its address.'
  );
}

/** A refusal from the bridge, in words an agent can act on. */
export function bridgeError(r: BridgeResult<unknown> & { ok: false }): CallToolResult {
  if (r.status === 0) return text(unreachable(r), true);
  if (r.status === 401 || (r.status === 503 && r.error !== 'store unavailable')) {
    return text(`Herald refused this MCP server's credentials (${r.error}); the operator must set MCP_BRIDGE_TOKEN for both.`, true);
  }
  return text(`Herald refused the request: ${r.error}.`, true);
}

/**
 * A waiting tool's time limit, under the API's own name (`timeout_ms`, the query parameter of the
 * operation it calls) and, deprecated but kept, the name it had first (`timeout_seconds`).
 */
export function waitArguments(maxMs: number, defaultMs: number): Record<string, JsonSchema> {
  return {
    timeout_ms: { type: 'integer', minimum: 0, maximum: maxMs, description: `How long to wait, in milliseconds (default ${defaultMs}), as the API's timeout_ms.` },
    timeout_seconds: { type: 'integer', minimum: 0, maximum: Math.floor(maxMs / 1000), description: 'Deprecated: timeout_ms in seconds (timeout_ms wins when both are given).' },
  };
}

/** The milliseconds a waiting tool's arguments ask for (waitArguments), else `defaultMs`. */
export function waitMsOf(args: Record<string, unknown>, defaultMs: number): number {
  if (typeof args['timeout_ms'] === 'number') return args['timeout_ms'];
  if (typeof args['timeout_seconds'] === 'number') return args['timeout_seconds'] * 1000;
  return defaultMs;
}
