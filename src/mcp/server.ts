import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import { withUtf16Lengths } from '../platform/contract/ajv.js';
import { SchemaReasons } from '../platform/contract/reasons.js';
import { text } from '../platform/mcp/tool.js';
import type { McpServerDeps } from './deps.js';
import { mcpTools } from './tools.js';
import { errorSummary } from '../platform/errors.js';

export type { McpServerDeps };

let compiled: Map<string, ValidateFunction> | undefined;
/** Says which argument is wrong, and how, when a validator refuses the input. */
const reasons = new SchemaReasons();

/** Input validators, compiled once per process (Streamable HTTP builds a server per request). */
function toolValidators(): Map<string, ValidateFunction> {
  if (compiled === undefined) {
    const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false }));
    compiled = new Map(mcpTools().map((t) => [t.name, ajv.compile(t.inputSchema)]));
  }
  return compiled;
}

/** Herald's MCP server (official SDK): the bridge's protocol as tools an agent can call. */
export function createMcpServer(deps: McpServerDeps): Server {
  const tools = mcpTools();
  const byName = new Map(tools.map((t) => [t.name, t]));
  const listed = tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
  const validators = toolValidators();
  const server = new Server({ name: 'herald', version: '0.1.0' }, { capabilities: { tools: {} } });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    const tool = byName.get(name);
    const validate = validators.get(name);
    if (tool === undefined || validate === undefined) return text(`Unknown tool ${name}.`, true);
    if (!validate(args)) {
      // In the bridge's words: the field, what it must be, and what the tool says the field is.
      const failure = reasons.failure(tool.inputSchema, args, undefined);
      const key = failure?.field?.split(/[.[]/)[0];
      const about = key === undefined ? undefined : ((tool.inputSchema['properties'] as Record<string, { description?: unknown }> | undefined)?.[key]?.description);
      const reason = (failure?.reason ?? 'the input is invalid').replace(/^request body/, 'the input');
      return text(`Invalid arguments: ${reason}${typeof about === 'string' ? ` (${key}: ${about.replace(/\.$/, '')})` : ''}.`, true);
    }
    try {
      return await tool.handler(args, deps);
    } catch (err) {
      deps.log.error({ tool: name, err: errorSummary(err) }, 'tool failed');
      return text('Something went wrong inside the Herald MCP server; nothing more is known to have been sent.', true);
    }
  });
  return server;
}
