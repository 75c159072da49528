import { loadSpec } from '../platform/contract/spec.js';

/** A JSON Schema for a tool's input, built from the contract's own schemas. */
export type JsonSchema = Record<string, unknown>;

/**
 * The contract's component schema `name`, with `$ref`s resolved and Herald's `x-` extensions
 * dropped: tool inputs take exactly the limits the bridge enforces, written once in openapi/.
 */
export function contractSchema(name: string, description?: string): JsonSchema {
  // Read-only walk of the parsed contract: resolve() builds new objects, never mutates it.
  const doc = loadSpec().document as { components: { schemas: Record<string, unknown> } };
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (typeof node !== 'object' || node === null) return node;
    const obj = node as Record<string, unknown>;
    if (typeof obj['$ref'] === 'string') {
      const target = obj['$ref'].replace('#/components/schemas/', '');
      return resolve(doc.components.schemas[target]);
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) if (!k.startsWith('x-')) out[k] = resolve(v);
    return out;
  };
  const schema = resolve(doc.components.schemas[name]) as JsonSchema | undefined;
  if (schema === undefined) throw new Error(`the contract has no schema ${name}`);
  return description !== undefined ? { ...schema, description } : schema;
}

export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: JsonSchema & { type: 'object' };
}

const object = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema & { type: 'object' } => ({
  type: 'object',
  properties,
  ...(required.length > 0 ? { required } : {}),
  additionalProperties: false,
});

const messageParts = (): Record<string, JsonSchema> => ({
  content: contractSchema('Content', 'Message text, 1 to 2000 characters. Mentions (@everyone, <@id>) are shown but never ping anyone.'),
  card: contractSchema('Card', 'Optional embed: title ≤256, description ≤4096, https url, color 0..16777215, footer ≤2048, up to 25 fields (name ≤256, value ≤1024); at most 6000 characters in all.'),
  links: contractSchema('Links', 'Optional link buttons, at most 5, each {label ≤80, url https}.'),
});

const NO_RETRY =
  'It sends exactly once: do not call it again for the same message. If it answers that delivery is still pending, check later with get_delivery and the request_id it gave.';

let definitions: ToolDefinition[] | undefined;

/** The tools, built once per process from the contract. */
export function toolDefinitions(): ToolDefinition[] {
  definitions ??= buildToolDefinitions();
  return definitions;
}

function buildToolDefinitions(): ToolDefinition[] {
  return [
    {
      name: 'get_capabilities',
      description: 'What this Discord bridge can do (post, dm, edit) and the destinations a post may target, with what each is for.',
      inputSchema: object({}),
    },
    {
      name: 'post_message',
      description: `Post a message to a Discord server's destination channel (alerts, deals, digest or ops; the server's operator maps each to a channel). ${NO_RETRY} Returns the message link, or why it failed.`,
      inputSchema: object(
        {
          guild_id: contractSchema('GuildId', 'The Discord server (guild) id.'),
          destination: contractSchema('Destination', 'alerts: time-sensitive findings and warnings; deals: notable deals or opportunities; digest: periodic summaries; ops: operational status.'),
          ...messageParts(),
        },
        ['guild_id', 'destination', 'content'],
      ),
    },
    {
      name: 'pair',
      description:
        'Pair this agent with a Discord user: they run `/agent pair` in Discord and give you the 27-character code (valid 10 minutes, single use). Needed before send_dm, and again after the user revokes with `/agent unregister`.',
      inputSchema: object({ code: { type: 'string', pattern: '^[A-Z2-9]{27}$', description: 'The pairing code, 27 characters A-Z and 2-9.' } }, ['code']),
    },
    {
      name: 'send_dm',
      description: `Send a direct message to the paired Discord user. Refuses when not paired, or when the user revoked access since pairing (pair again). ${NO_RETRY}`,
      inputSchema: object(messageParts(), ['content']),
    },
    {
      name: 'list_recipients',
      description: 'Discord users registered with this bot (who could be paired), oldest first, at most 100.',
      inputSchema: object({}),
    },
    {
      name: 'edit_message',
      description:
        'Change a message this agent sent earlier (post_message or send_dm), by the request_id those tools returned. Include at least one of content, card or links; what you include replaces that part. Edits apply in the order you make them. Messages older than 8 days cannot be edited.',
      inputSchema: object({ message_ref: contractSchema('RequestId', 'The request_id post_message or send_dm returned.'), ...messageParts() }, ['message_ref']),
    },
    {
      name: 'get_delivery',
      description: 'The state of a message by its request_id: pending, delivered (with its link), failed (with the reason), or unknown (being re-driven after a crash). Use it instead of sending again.',
      inputSchema: object({ request_id: contractSchema('RequestId', 'The request_id a sending tool returned.') }, ['request_id']),
    },
  ];
}

/** What each failure code means for the agent, and whether to try again. */
export const FAILURE_ADVICE: Readonly<Record<string, string>> = {
  CAPABILITY_UNAVAILABLE: 'this bridge does not send that kind of message (DMs or edits are turned off). Do not retry.',
  UPSTREAM_UNAVAILABLE:
    'Discord refused it, or that destination has no channel mapped in that server. Sending it again will fail the same way until the server operator fixes the mapping or permissions.',
  RECIPIENT_UNREACHABLE: 'the user is not registered with the bot or does not accept DMs. Do not retry; ask them to run `/agent register` (and `/agent pair`).',
  NOT_FOUND: 'the message to edit is unknown, not delivered (yet), older than 8 days, or itself an edit. Do not retry.',
};
