import { archiveTools } from '../modules/archive/archive.tools.js';
import { chatTools } from '../modules/chat/chat.tools.js';
import { commandTools } from '../modules/commands/command.tools.js';
import { deliveryTools } from '../modules/deliveries/delivery.tools.js';
import { handoffTools } from '../modules/handoffs/handoff.tools.js';
import { identityTools } from '../modules/identity/identity.tools.js';
import type { McpTool } from '../platform/mcp/tool.js';
import type { McpServerDeps } from './deps.js';

let tools: readonly McpTool<McpServerDeps>[] | undefined;

/** Every MCP tool, from the modules that own them, built once per process from the contract. */
export function mcpTools(): readonly McpTool<McpServerDeps>[] {
  if (tools === undefined) {
    const all = [...deliveryTools(), ...identityTools(), ...commandTools(), ...handoffTools(), ...archiveTools(), ...chatTools()];
    const names = new Set(all.map((t) => t.name));
    if (names.size !== all.length) throw new Error('two MCP tools share a name');
    tools = all;
  }
  return tools;
}
