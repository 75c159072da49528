import { readContract, type OpenApiDocument } from '../infra/contract/spec.js';
import { MODULES } from '../modules/modules.js';
import type { McpTool } from '../infra/mcp/tool.js';
import type { McpServerDeps } from './deps.js';

let tools: readonly McpTool<McpServerDeps>[] | undefined;

/** Every MCP tool, from the modules that declare them (src/modules/modules.ts), built once per process. */
export function mcpTools(): readonly McpTool<McpServerDeps>[] {
  if (tools === undefined) {
    // A module's tools ask `herald mcp` for part of what it hands every tool (McpServerDeps).
    const all = MODULES.flatMap((m) => (m.tools?.() ?? []) as readonly McpTool<McpServerDeps>[]);
    const names = new Set(all.map((t) => t.name));
    if (names.size !== all.length) throw new Error('two MCP tools share a name');
    tools = all;
  }
  return tools;
}

/** The modules' own contract documents (their `contract` files): the bridge client calls their operations by id too. */
export function moduleContracts(): OpenApiDocument[] {
  return MODULES.flatMap((m) => (m.contract === undefined ? [] : [readContract(m.contract)]));
}
