import type { BridgeClient, Schema } from '../../client/bridge-client.js';
import { bridgeError, contractSchema, hints, json, object, text, type McpTool } from '../../infra/mcp/tool.js';

/** What these tools need from `herald mcp`: the bridge. */
export interface CommandToolDeps {
  bridge: BridgeClient;
}

/** The command registry's MCP tools: list, describe, run (validate by default). */
export function commandTools(): McpTool<CommandToolDeps>[] {
  return [
    {
      name: 'list_commands',
      operations: ['listCommands'],
      title: "Herald's commands",
      annotations: hints(true, false, true, false),
      output: 'CommandList',
      description:
        "Herald's Discord commands: every visible command with its aliases, and per subcommand its usage, parameters (type, required, choices), preconditions (in_guild, manage_guild, registered), effects (read_only, changes_herald_data, sends_to_platform, revokes_credentials), whether it is slashCommandOnly (the identity commands: only the user runs them, in Discord), and the registry fingerprint.",
      inputSchema: object({}),
      async handler(_args, { bridge }) {
        const r = await bridge.call('listCommands');
        return r.ok ? json(r.data) : bridgeError(r);
      },
    },
    {
      name: 'describe_command',
      operations: ['describeCommand'],
      title: 'One command',
      annotations: hints(true, false, true, false),
      output: 'CommandDescription',
      description: 'One of Herald\'s commands by its name or any alias (e.g. "dest" for destinations): the same record list_commands gives.',
      inputSchema: object({ name: { type: 'string', pattern: '^[a-z0-9_-]{1,32}$', description: 'A command name or alias, lower case.' } }, ['name']),
      async handler(args, { bridge }) {
        const r = await bridge.call('describeCommand', { path: { name: String(args['name']) } });
        if (!r.ok) return r.status === 404 ? text(`No command or alias "${String(args['name'])}"; list_commands shows them all.`, true) : bridgeError(r);
        return json(r.data);
      },
    },
    {
      name: 'run_command',
      operations: ['runCommand'],
      title: 'Validate or run a command as a user',
      // execute mode changes Herald's data or the platform (a command may revoke credentials); the same
      // idempotencyKey again returns the stored result, and validate mode changes nothing.
      annotations: hints(false, true, true, true),
      output: 'CommandRunResult',
      // Its result carries `replayed` already (the bridge's own answer), in its text and its data.
      replay: { key: 'idempotencyKey' },
      description:
        'Run one of Herald\'s commands as the Discord user userId would, in guildId/channelId, with that user\'s real permissions (Herald looks them up; a request cannot grant any). mode "validate" (the default) parses and checks preconditions and changes nothing. mode "execute" (only when the operator enabled it) needs sourceMessageId (the user\'s own message asking for it, written in the last few minutes; one message authorises one executed command, so ask again for another) and an idempotencyKey (16-128 characters, e.g. derived from that message): repeating the same call returns the stored result. Validate first; if sideEffectsMayHaveOccurred is true, never retry with a new key. slashCommandOnly commands (agent register, pair, unregister) are refused: ask the user to run them in Discord. Ids are decimal strings.',
      inputSchema: { ...contractSchema('CommandRunRequest'), type: 'object' },
      async handler(args, { bridge }) {
        const r = await bridge.call('runCommand', { body: args as unknown as Schema<'CommandRunRequest'> });
        if (!r.ok) return bridgeError(r);
        return { ...json(r.data), ...(r.data.ok ? {} : { isError: true }) };
      },
    },
  ];
}
