import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import { withUtf16Lengths } from '../platform/contract/ajv.js';
import { SchemaReasons } from '../platform/contract/reasons.js';
import { contractOutput, text, type McpTool } from '../platform/mcp/tool.js';
import type { McpServerDeps } from './deps.js';
import type { Caller, McpPolicy } from './policy.js';
import { mcpTools } from './tools.js';
import { errorSummary } from '../platform/errors.js';

export type { McpServerDeps };

/** A tool's compiled checks: its input, and its structured result (the contract's response schema). */
interface Compiled {
  tool: McpTool<McpServerDeps>;
  listed: Tool;
  input: ValidateFunction;
  output: ValidateFunction;
}

let compiled: Map<string, Compiled> | undefined;
/** Says which argument is wrong, and how, when a validator refuses the input. */
const reasons = new SchemaReasons();

/**
 * Every tool as MCP lists it (title, annotations, input and output schemas from the contract) with
 * its validators, compiled once per process (Streamable HTTP builds a server per request).
 */
function compiledTools(): Map<string, Compiled> {
  if (compiled === undefined) {
    const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateFormats: false }));
    compiled = new Map(
      mcpTools().map((tool) => {
        const outputSchema = contractOutput(tool.output);
        const listed: Tool = { name: tool.name, title: tool.title, description: tool.description, inputSchema: tool.inputSchema, outputSchema, annotations: { title: tool.title, ...tool.annotations } };
        return [tool.name, { tool, listed, input: ajv.compile(tool.inputSchema), output: ajv.compile(outputSchema) }];
      }),
    );
  }
  return compiled;
}

/** Every tool as MCP lists it. */
export function listedTools(): Tool[] {
  return [...compiledTools().values()].map((c) => c.listed);
}

/** The `confirm_token` argument the operator's policy adds to a tool that needs a confirming call. */
const CONFIRM_TOKEN = {
  type: 'string',
  minLength: 1,
  description: "The operator's policy asks for a second, confirming call: the confirm_token the first call answered (with the same arguments), to go ahead.",
} as const;

/** A tool as listed to a caller who must confirm it: with a `confirm_token` argument. */
function withConfirm(listed: Tool): Tool {
  const properties = (listed.inputSchema.properties ?? {}) as Record<string, object>;
  return { ...listed, inputSchema: { ...listed.inputSchema, properties: { ...properties, confirm_token: CONFIRM_TOKEN } } };
}

/** Who calls, and the operator's policy for them (src/mcp/policy.ts); without it, every tool for everyone. */
export interface McpServerAccess {
  policy: McpPolicy;
  caller: Caller;
  /** What a confirmed call runs with: the same, its bridge calls carrying the confirm token (Herald checks and uses it). */
  confirmed?(confirmToken: string): McpServerDeps;
}

/**
 * Herald's MCP server (official SDK). The low-level `Server` rather than `McpServer.registerTool`:
 * registerTool takes zod schemas, and Herald's schemas are the contract's JSON Schemas (openapi/),
 * written once; this server gives the same guarantees itself: it lists each tool's output schema,
 * validates every input against the input schema and checks every structured result against the
 * output schema.
 */
export function createMcpServer(deps: McpServerDeps, access?: McpServerAccess): Server {
  const tools = compiledTools();
  const listed = access === undefined ? listedTools() : [...tools.values()].filter((c) => access.policy.listed(c.tool, access.caller)).map((c) => (access.policy.needsConfirm(c.tool, access.caller) ? withConfirm(c.listed) : c.listed));
  // logging: the inbox's notifications (src/mcp/inbox-notify.ts) are log messages a client may act on.
  const server = new Server({ name: 'herald', version: '0.1.0' }, { capabilities: { tools: {}, logging: {} } });

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const { name } = request.params;
    let args: Record<string, unknown> = request.params.arguments ?? {};
    const entry = tools.get(name);
    if (entry === undefined) return text(`Unknown tool ${name}.`, true);
    const { tool } = entry;
    // The policy's `confirm_token` argument is the policy's, not the tool's.
    let confirmToken: string | undefined;
    if (access?.policy.needsConfirm(tool, access.caller) === true && 'confirm_token' in args) {
      const { confirm_token: given, ...rest } = args;
      confirmToken = typeof given === 'string' ? given : undefined;
      args = rest;
    }
    if (!entry.input(args)) {
      // In the bridge's words: the field, what it must be, and what the tool says the field is.
      const failure = reasons.failure(tool.inputSchema, args, undefined);
      const key = failure?.field?.split(/[.[]/)[0];
      const properties = tool.inputSchema['properties'];
      const property = key !== undefined && typeof properties === 'object' && properties !== null ? (properties as Record<string, unknown>)[key] : undefined;
      const about = typeof property === 'object' && property !== null ? (property as { description?: unknown }).description : undefined;
      const reason = (failure?.reason ?? 'the input is invalid').replace(/^request body/, 'the input');
      return text(`Invalid arguments: ${reason}${typeof about === 'string' ? ` (${key}: ${about.replace(/\.$/, '')})` : ''}.`, true);
    }
    try {
      const verdict = access?.policy.check(tool, access.caller, args, confirmToken);
      const confirmed = verdict !== undefined && 'confirmed' in verdict && typeof verdict['confirmed'] === 'string' ? verdict['confirmed'] : undefined;
      if (verdict !== undefined && confirmed === undefined) return verdict as CallToolResult;
      const result = await tool.handler(args, confirmed === undefined ? deps : (access?.confirmed?.(confirmed) ?? deps));
      // A structured result the contract does not describe is Herald's bug: said in the log, never hidden.
      if (result.structuredContent !== undefined && !entry.output(result.structuredContent)) {
        deps.log.error({ tool: name, errors: entry.output.errors?.slice(0, 3) }, 'tool result does not match its output schema');
      }
      return result;
    } catch (err) {
      deps.log.error({ tool: name, err: errorSummary(err) }, 'tool failed');
      return text('Something went wrong inside the Herald MCP server; nothing more is known to have been sent.', true);
    }
  });
  return server;
}
