import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { BridgeResult } from '../../client/bridge-client.js';
import { dereferenced, loadSpec } from '../contract/spec.js';

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

let schemas: Record<string, unknown> | undefined;
let operations: Map<string, JsonSchema> | undefined;

/** Each operation's success (2xx) JSON response schema, by operationId, from the dereferenced contract. */
function responseSchemas(): Map<string, JsonSchema> {
  if (operations === undefined) {
    operations = new Map();
    const doc = dereferenced(loadSpec().document) as { paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: JsonSchema }> }> }>> };
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item)) {
        if (typeof op !== 'object' || op === null || op.operationId === undefined) continue;
        const ok = Object.entries(op.responses ?? {}).find(([status, r]) => status.startsWith('2') && r.content?.['application/json']?.schema !== undefined);
        const schema = ok?.[1].content?.['application/json']?.schema;
        if (schema !== undefined) operations.set(op.operationId, schema);
      }
    }
  }
  return operations;
}

/**
 * A tool's output schema: the contract's component schema `name`, or else the success response of
 * the operation `name`, without Herald's `x-` extensions, its root an object (as MCP requires).
 */
export function contractOutput(name: string): JsonSchema & { type: 'object' } {
  schemas ??= (dereferenced(loadSpec().document) as { components: { schemas: Record<string, unknown> } }).components.schemas;
  const schema = schemas[name] !== undefined ? contractSchema(name) : (stripExtensions(responseSchemas().get(name)) as JsonSchema | undefined);
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
export function contractSchema(name: string, description?: string): JsonSchema {
  schemas ??= (dereferenced(loadSpec().document) as { components: { schemas: Record<string, unknown> } }).components.schemas;
  const schema = stripExtensions(schemas[name]) as JsonSchema | undefined;
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
