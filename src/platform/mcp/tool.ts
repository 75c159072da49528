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
  readonly title?: string;
  /** What the tool does to the world (MCP's hints): read-only, destructive, idempotent, open-world. */
  readonly annotations?: ToolAnnotations;
  /** The contract's component schema (openapi/) its `structuredContent` is valid against. */
  readonly output?: string;
  readonly inputSchema: JsonSchema & { type: 'object' };
  handler(args: Record<string, unknown>, deps: Deps): Promise<CallToolResult>;
}

/** A tool's answer in plain words. */
export const text = (t: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });

/** An input object of exactly these properties. */
export const object = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema & { type: 'object' } => ({
  type: 'object',
  properties,
  ...(required.length > 0 ? { required } : {}),
  additionalProperties: false,
});

let schemas: Record<string, unknown> | undefined;

/**
 * The contract's component schema `name`, with `$ref`s resolved (their siblings kept, as the API
 * reads them: a field's own description) and Herald's `x-` extensions dropped: tool inputs take
 * exactly the limits the bridge enforces, written once in openapi/.
 */
export function contractSchema(name: string, description?: string): JsonSchema {
  schemas ??= (dereferenced(loadSpec().document) as { components: { schemas: Record<string, unknown> } }).components.schemas;
  // A copy without the extensions: the dereferenced document is shared, never changed.
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (typeof node !== 'object' || node === null) return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) if (!k.startsWith('x-')) out[k] = strip(v);
    return out;
  };
  const schema = strip(schemas[name]) as JsonSchema | undefined;
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
