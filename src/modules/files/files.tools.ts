import type { BridgeClient } from '../../client/bridge-client.js';
import { bridgeError, contractSchema, object, type McpTool } from '../../infra/mcp/tool.js';

/** What this tool needs from `herald mcp`: the bridge. */
export interface FileToolDeps {
  bridge: BridgeClient;
}

/** Files in: a message's attachment fetched into Herald's store (its bytes stay there). */
export function fileTools(): McpTool<FileToolDeps>[] {
  return [
    {
      name: 'download_attachment',
      operations: ['downloadAttachment'],
      title: 'Download an attachment',
      description:
        "Fetch a file attached to a Discord message into Herald's file store, and get its name, type, size, SHA-256 and a Herald URL (GET it with the bridge token) — never the bytes themselves. The message must be in a channel a destination maps to, or in a DM with a registered user. Fetching the same attachment again answers the stored file without downloading it again.",
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
      output: 'StoredFile',
      replay: { natural: 'the same attachment again answers the file already stored (existing: true) and downloads nothing' },
      inputSchema: object(
        {
          channel_id: contractSchema('ChannelId', 'The channel (or DM channel) the message is in.'),
          message_id: contractSchema('ChannelId', 'The message id.'),
          attachment_id: contractSchema('ChannelId', "The attachment's id (the message's attachments list gives it)."),
        },
        ['channel_id', 'message_id', 'attachment_id'],
      ),
      async handler(args, { bridge }) {
        const r = await bridge.call('downloadAttachment', { body: { channel_id: String(args['channel_id']), message_id: String(args['message_id']), attachment_id: String(args['attachment_id']) } });
        if (!r.ok) return bridgeError(r);
        const f = r.data;
        return {
          content: [{ type: 'text', text: `${f.existing ? 'Already stored' : 'Stored'}: ${f.filename} (${f.content_type}, ${f.size} bytes, sha256 ${f.sha256}). Fetch it from Herald at ${f.url} with the bridge token.` }],
          structuredContent: f,
        };
      },
    },
  ];
}
