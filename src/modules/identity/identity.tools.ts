import type { BridgeClient } from '../../client/bridge-client.js';
import { bridgeError, hints, object, result, text, type McpTool } from '../../infra/mcp/tool.js';

/** What these tools need from `herald mcp`: the bridge (Herald keeps the pairing a redeemed code makes). */
export interface IdentityToolDeps {
  bridge: BridgeClient;
}

/** The identity module's MCP tools: pairing with a Discord user, and who could be paired. */
export function identityTools(): McpTool<IdentityToolDeps>[] {
  return [
    {
      name: 'pair',
      operations: ['redeemPairingCode'],
      title: 'Pair with a Discord user',
      // Replaces an earlier pairing (destructive); a code is single use, so the same call again changes nothing.
      annotations: hints(false, true, true, false),
      output: 'Pairing',
      replay: { natural: 'a pairing code is single use: the same code again is refused and changes nothing' },
      description:
        'Pair this agent with a Discord user: they run `/agent pair` in Discord and give you the 27-character code (valid 10 minutes, single use). Needed before send_dm, and again after the user revokes with `/agent unregister`.',
      inputSchema: object({ code: { type: 'string', pattern: '^[A-Z2-9]{27}$', description: 'The pairing code, 27 characters A-Z and 2-9.' } }, ['code']),
      async handler(args, { bridge }) {
        // Redeeming keeps the pairing in Herald for this caller: send_dm (and the API) read it from there.
        const r = await bridge.call('redeemPairingCode', { body: { code: String(args['code']) } });
        if (!r.ok) return r.status === 404 ? text('That code is invalid, expired or already used. Ask the user to run `/agent pair` again and give you the new code (where Herald is several bots, on the bot this agent speaks as: each bot has its own `/agent`).', true) : bridgeError(r);
        return result(`Paired with Discord user ${r.data.discord_user_id}. send_dm now reaches them.`, r.data);
      },
    },
    {
      name: 'list_recipients',
      operations: ['listRecipients'],
      title: 'Who could be paired',
      annotations: hints(true, false, true, false),
      output: 'RecipientList',
      description: 'Discord users registered with this bot (who could be paired), oldest first, at most 100.',
      inputSchema: object({}),
      async handler(_args, { bridge }) {
        const r = await bridge.call('listRecipients');
        if (!r.ok) return bridgeError(r);
        if (r.data.items.length === 0) return result('No one is registered yet; a user runs `/agent register` in Discord (where Herald is several bots, on the bot this agent speaks as).', r.data);
        return result(r.data.items.map((i) => `- ${i.display_name} (${i.user_id})`).join('\n'), r.data);
      },
    },
  ];
}
