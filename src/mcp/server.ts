import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import { withUtf16Lengths } from '../platform/contract/ajv.js';
import { SchemaReasons } from '../platform/contract/reasons.js';
import { contractOutput, text, type McpTool } from '../platform/mcp/tool.js';
import type { McpServerDeps } from './deps.js';
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
    const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false }));
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

/**
 * What a caller may do, asked before each call (the operator's policy, see src/platform/policy/):
 * undefined to go ahead, or the refusal an agent reads.
 */
export type ToolGate = (tool: McpTool<McpServerDeps>, args: Record<string, unknown>) => Promise<CallToolResult | undefined> | CallToolResult | undefined;

/**
 * Herald's MCP server (official SDK). The low-level `Server` rather than `McpServer.registerTool`:
 * registerTool takes zod schemas, and Herald's schemas are the contract's JSON Schemas (openapi/),
 * written once; this server gives the same guarantees itself: it lists each tool's output schema,
 * validates every input against the input schema and checks every structured result against the
 * output schema.
 */
export function createMcpServer(deps: McpServerDeps, gate?: ToolGate): Server {
  const tools = compiledTools();
  const listed = listedTools();
  const server = new Server({ name: 'herald', version: '0.1.0' }, { capabilities: { tools: {} } });

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const { name } = request.params;
    const args: Record<string, unknown> = request.params.arguments ?? {};
    const entry = tools.get(name);
    if (entry === undefined) return text(`Unknown tool ${name}.`, true);
    const { tool } = entry;
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
      const refused = await gate?.(tool, args);
      if (refused !== undefined) return refused;
      const result = await tool.handler(args, deps);
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
