import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { BridgeClient, Schema } from '../../client/bridge-client.js';
import { bridgeError, contractSchema, hints, object, replayMarked, result, text, unreachable, type JsonSchema, type McpTool } from '../../infra/mcp/tool.js';
import { filesArgument, uploadToolFiles, type LocalFiles } from './delivery.tool-files.js';

/** What these tools need from `herald mcp`: the bridge, the agent's own records, how long to wait. */
export interface DeliveryToolDeps {
  bridge: BridgeClient;
  state: {
    message(requestId: string): unknown;
    rememberMessage(requestId: string, kind: 'post' | 'dm'): Promise<void>;
    nextSeq(requestId: string, editId?: string): Promise<number>;
    owns(requestId: string): boolean;
    claim(requestId: string): Promise<boolean>;
    release(requestId: string): Promise<void>;
  };
  waitMs: number;
  /** Which `files: [{path}]` a call may attach (stdio: any; HTTP: the operator's folder or none). Default none. */
  localFiles?: LocalFiles | undefined;
}

type Args = Record<string, unknown>;
type Body = { content?: string; card?: unknown; links?: unknown };

const messageParts = (): Record<string, JsonSchema> => ({
  content: contractSchema('Content', 'Message text, 1 to 2000 characters. Mentions (@everyone, <@id>) are shown but never ping anyone.'),
  card: contractSchema('Card', 'Optional embed: title ≤256, description ≤4096, https url, color 0..16777215, footer ≤2048, up to 25 fields (name ≤256, value ≤1024); at most 6000 characters in all.'),
  links: contractSchema('Links', 'Optional link buttons, at most 5, each {label ≤80, url https}.'),
});

const NO_RETRY =
  'It sends exactly once per request_id: without one, each call makes a fresh request_id and so a new message (not idempotent); give the same request_id again and it never sends twice. If it answers that delivery is still pending, check later with get_delivery and the request_id it gave.';

/** A sending tool's own request_id: the same one again is the same message (the protocol's retry). */
const ownRequestId = (): JsonSchema => contractSchema('RequestId', 'Optional: 64 lowercase hex characters naming this message; the same one again never sends twice. Default: a fresh one.');

/** What each failure code means for the agent, and whether to try again. */
export const FAILURE_ADVICE: Readonly<Record<string, string>> = {
  CAPABILITY_UNAVAILABLE: 'this bridge does not send that kind of message (DMs or edits are turned off). Do not retry.',
  UPSTREAM_UNAVAILABLE:
    'Discord refused it, or that destination has no channel mapped in that server. Sending it again will fail the same way until the server operator fixes the mapping or permissions.',
  RECIPIENT_UNREACHABLE: 'the user is not registered with the bot or does not accept DMs. Do not retry; ask them to run `/agent register` (and `/agent pair`) on the bot this agent speaks as.',
  NOT_FOUND: 'the message to edit, delete or react to is unknown, not delivered (yet), older than 8 days, deleted, or not one this agent sent. Do not retry.',
};

/** The deliveries module's MCP tools: capabilities, posts, DMs, edits, and a delivery's state. */
export function deliveryTools(): McpTool<DeliveryToolDeps>[] {
  return [
    {
      name: 'get_capabilities',
      operations: ['getCapabilities', 'getGuildDestinations'],
      title: 'What the bridge can do',
      annotations: hints(true, false, true, false),
      output: 'Capabilities',
      description:
        'What this Discord bridge can do (post, dm, edit) and the destinations a post may target, with what each is for. Give guild_id to learn which destinations that server has mapped to a channel: a post to an unmapped one fails.',
      inputSchema: object({ guild_id: contractSchema('GuildId', 'Optional: the Discord server (guild) you mean to post to.') }),
      async handler(args, { bridge }) {
        const r = await bridge.call('getCapabilities', { query: { include: 'platforms' } });
        if (!r.ok) return bridgeError(r);
        const c = r.data;
        const lines = [`Posts: ${c.targeted_post ? 'yes' : 'no'}. DMs: ${c.dm ? 'yes' : 'no'}. Edits: ${c.edit ? 'yes' : 'no'}.`];
        // Per platform (react, delete_message, and what a message may carry there).
        const yes = (b: boolean): string => (b ? 'yes' : 'no');
        for (const p of c.platforms ?? []) lines.push(`On ${p.name}: reactions ${yes(p.reactions)}, deletes ${yes(p.deletes)}, replies ${yes(p.replies)}, threads ${yes(p.threads)}, files ${yes(p.files)}.`);
        const guildId = args['guild_id'] === undefined ? undefined : String(args['guild_id']);
        const mapped = guildId === undefined ? undefined : await bridge.call('getGuildDestinations', { path: { guild_id: guildId } }, { once: true });
        if (guildId === undefined || mapped === undefined) {
          lines.push('Destinations (give guild_id to see which are mapped in a server):', ...c.destinations.map((d) => `- ${d.destination}: ${d.description}`));
        } else if (!mapped.ok) {
          lines.push(`Destinations (Herald did not say which are mapped in server ${guildId}: ${mapped.error}):`, ...c.destinations.map((d) => `- ${d.destination}: ${d.description}`));
        } else {
          const byName = new Map(mapped.data.destinations.map((d) => [d.destination, d.mapped]));
          lines.push(
            `Destinations in server ${guildId}:`,
            ...c.destinations.map((d) => `- ${d.destination}: ${d.description} — ${byName.get(d.destination) === true ? 'mapped' : 'NOT mapped: a post here fails until the operator maps a channel'}`),
          );
        }
        return result(lines.join('\n'), c);
      },
    },
    {
      name: 'post_message',
      operations: ['uploadFile', 'createDelivery', 'getDelivery', 'getDeliveryDetail', 'claimAgentRequest', 'releaseAgentRequest', 'rememberAgentMessage'],
      title: 'Post to a destination channel',
      annotations: hints(false, false, false, true),
      output: 'DeliveryState',
      replay: { key: 'request_id' },
      description: `Post a message to a Discord server's destination channel (alerts, deals, digest or ops; the server's operator maps each to a channel). ${NO_RETRY} Returns the message link, or why it failed.`,
      inputSchema: object(
        {
          guild_id: contractSchema('GuildId', 'The Discord server (guild) id.'),
          destination: contractSchema('Destination', 'alerts: time-sensitive findings and warnings; deals: notable deals or opportunities; digest: periodic summaries; ops: operational status.'),
          ...messageParts(),
          request_id: ownRequestId(),
          files: filesArgument,
          reply_to: contractSchema('ReplyTo', 'Optional: the id of a message in that channel (or in thread_id) to reply to.'),
          thread_id: contractSchema('ThreadId', 'Optional: post into this thread of the destination channel (Discord: the thread id; Slack: the ts of its first message).'),
        },
        ['guild_id', 'destination', 'content'],
      ),
      async handler(args, deps) {
        const files = await uploadToolFiles(deps.bridge, args['files'], deps.localFiles);
        if ('error' in files) return text(`Nothing was sent: ${files.error}.`, true);
        return send(deps, { kind: 'post', target: { guild_id: String(args['guild_id']), destination: args['destination'] as 'alerts', ...threadingArgs(args) }, body: { ...bodyOf(args), ...files } as { content: string } }, idOf(args));
      },
    },
    {
      name: 'send_dm',
      operations: ['getPairing', 'getRegistration', 'uploadFile', 'createDelivery', 'getDelivery', 'getDeliveryDetail', 'claimAgentRequest', 'releaseAgentRequest', 'rememberAgentMessage'],
      title: 'DM the paired user',
      annotations: hints(false, false, false, true),
      output: 'DeliveryState',
      replay: { key: 'request_id' },
      description: `Send a direct message to the paired Discord user. Refuses when not paired, or when the user revoked access since pairing (pair again). ${NO_RETRY}`,
      inputSchema: object({ ...messageParts(), request_id: ownRequestId(), files: filesArgument, reply_to: contractSchema('ReplyTo', 'Optional: the id of a message in the DM to reply to.') }, ['content']),
      async handler(args, deps) {
        const pairing = await pairedUser(deps.bridge);
        if ('content' in pairing) return pairing;
        const files = await uploadToolFiles(deps.bridge, args['files'], deps.localFiles);
        if ('error' in files) return text(`Nothing was sent: ${files.error}.`, true);
        return send(deps, { kind: 'dm', target: { user_id: pairing.user_id, ...(typeof args['reply_to'] === 'string' ? { reply_to: args['reply_to'] } : {}) }, body: { ...bodyOf(args), ...files } as { content: string } }, idOf(args));
      },
    },
    {
      name: 'edit_message',
      operations: ['createDelivery', 'getDelivery', 'getDeliveryDetail', 'getAgentMessage', 'nextAgentEditSeq', 'claimAgentRequest', 'releaseAgentRequest'],
      title: 'Edit a message this agent sent',
      // Replaces what the message said (destructive); the same edit again leaves it as it is (idempotent).
      annotations: hints(false, true, true, true),
      output: 'DeliveryState',
      // request_id names the message edited, so the edit's own key is edit_id.
      replay: { key: 'edit_id' },
      description:
        'Change a message this agent sent earlier (post_message or send_dm), by the request_id those tools returned (give it as request_id; message_ref, its older name, is the same). Include at least one of content, card or links; what you include replaces that part. Edits apply in the order you make them; the same edit again leaves the message as it is. Give edit_id to retry an edit safely: the same edit_id again is the same edit, never applied twice. Messages older than 8 days cannot be edited.',
      inputSchema: object({
        request_id: contractSchema('RequestId', 'The request_id post_message or send_dm returned: the message to edit.'),
        message_ref: contractSchema('RequestId', 'The same as request_id (its older name); give one of the two.'),
        ...messageParts(),
        edit_id: contractSchema('RequestId', "Optional: 64 lowercase hex characters naming this edit; the same one again is this edit, not a new one. Default: a fresh one."),
      }),
      async handler(args, deps) {
        const given = [args['request_id'], args['message_ref']].filter((v): v is string => typeof v === 'string');
        if (given.length === 0) return text('Invalid arguments: request_id is required: the request_id post_message or send_dm returned.', true);
        if (given.length === 2 && given[0] !== given[1]) return text('Invalid arguments: request_id and message_ref name different messages; give one of them.', true);
        const ref = given[0] as string;
        const body = bodyOf(args);
        if (body.content === undefined && body.card === undefined && body.links === undefined) return text('Include at least one of content, card or links.', true);
        if ((await deps.state.message(ref)) === undefined) return text('This agent did not send a message with that request_id (or it is older than 8 days); only its own messages can be edited.', true);
        const editId = typeof args['edit_id'] === 'string' ? args['edit_id'] : undefined;
        // The same edit_id keeps its seq, so its retry is the very same request (answered as a replay).
        const seq = await deps.state.nextSeq(ref, editId);
        return send(deps, { kind: 'edit', target: { message_ref: ref, seq }, body: body as { content: string } }, editId, 'edit_id');
      },
    },
    ...messageOpTools(),
    {
      name: 'get_delivery',
      operations: ['getDelivery', 'getDeliveryDetail', 'getAgentOwnership'],
      title: 'A message\'s delivery state',
      annotations: hints(true, false, true, false),
      output: 'DeliveryState',
      description: 'The state of a message by its request_id: pending, delivered (with its link), failed (with the reason), or unknown (not confirmed yet). Use it instead of sending again.',
      inputSchema: object({ request_id: contractSchema('RequestId', 'The request_id a sending tool returned.') }, ['request_id']),
      async handler(args, { bridge, state }) {
        // Another OAuth client's delivery is, to this one, no delivery at all.
        const unknown = text('No delivery with that request_id (records are kept 8 days).', true);
        if (!(await state.owns(String(args['request_id'])))) return unknown;
        const r = await bridge.call('getDelivery', { path: { request_id: String(args['request_id']) } });
        if (!r.ok) return r.status === 404 ? unknown : bridgeError(r);
        return describe(r.data, String(args['request_id']), bridge);
      },
    },
  ];
}

function bodyOf(args: Args): Body {
  const body: Body = {};
  if (args['content'] !== undefined) body.content = String(args['content']);
  if (args['card'] !== undefined) body.card = args['card'];
  if (args['links'] !== undefined) body.links = args['links'];
  return body;
}

/**
 * The user this caller is paired with (Herald's pairing, however the code was redeemed), only while
 * that user's registration is the one the code was issued for; else what the agent reads instead.
 */
async function pairedUser(bridge: BridgeClient): Promise<{ user_id: string } | CallToolResult> {
  const paired = await bridge.call('getPairing');
  if (!paired.ok && paired.status === 404) return text('Not paired with anyone yet. Ask the user to run `/agent pair` in Discord and call pair with the code.', true);
  if (!paired.ok) return bridgeError(paired);
  const pairing = paired.data;
  const reg = await bridge.call('getRegistration', { path: { user_id: pairing.user_id } });
  if (!reg.ok && reg.status === 404) return text('The paired user has unregistered (`/agent unregister`): DMs are revoked. They must `/agent register` and `/agent pair` again, then call pair.', true);
  if (!reg.ok) return bridgeError(reg);
  if (reg.data.generation !== pairing.generation) {
    return text('The paired user revoked access and registered again since pairing. Refusing to DM until you pair again: ask them to run `/agent pair` and call pair with the code.', true);
  }
  return { user_id: pairing.user_id };
}

/** The request_id the agent gave, if any. */
const idOf = (args: Args): string | undefined => (typeof args['request_id'] === 'string' ? args['request_id'] : undefined);

/**
 * React and delete (issue 25): each a delivery like a post, sent exactly once; their structured
 * result is the delivery's state (the contract's Schema<'DeliveryState'>).
 */
function messageOpTools(): McpTool<DeliveryToolDeps>[] {
  return [
    {
      name: 'react',
      operations: ['getPairing', 'getRegistration', 'createDelivery', 'getDelivery', 'getDeliveryDetail', 'getAgentOwnership', 'claimAgentRequest', 'releaseAgentRequest'],
      title: 'React to a message',
      description: `Add a reaction to a message (or take this agent's reaction off with remove: true): a message this agent sent (message_ref, the request_id post_message or send_dm returned), a message in a server's destination channel (guild_id, destination and message_id), or a message in the DM with the paired user (message_id alone). Emoji: a unicode emoji such as 👍, or a custom one as name:id. Adding a reaction already there, or removing one already gone, is fine. ${NO_RETRY}`,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
      output: 'DeliveryState',
      replay: { key: 'request_id' },
      inputSchema: object(
        {
          emoji: contractSchema('Emoji', 'A unicode emoji (👍) or a custom one as name:id.'),
          request_id: contractSchema('RequestId', 'Optional: 64 lowercase hex characters naming this reaction (not the message: that is message_ref); the same one again never sends twice. Default: a fresh one.'),
          message_ref: contractSchema('MessageRef', 'The request_id post_message or send_dm returned.'),
          guild_id: contractSchema('GuildId', 'With destination and message_id: the Discord server.'),
          destination: contractSchema('Destination', 'With guild_id and message_id: the destination channel the message is in.'),
          message_id: contractSchema('MessageId', 'The platform message id (with guild_id and destination; alone: in the DM with the paired user).'),
          remove: { type: 'boolean', description: 'True takes this agent\'s reaction off instead.' },
        },
        ['emoji'],
      ),
      async handler(args, deps) {
        const body = { emoji: String(args['emoji']), ...(args['remove'] === true ? { remove: true } : {}) };
        const messageId = args['message_id'] === undefined ? undefined : String(args['message_id']);
        let target: Record<string, string>;
        if (args['message_ref'] !== undefined) {
          if (!(await deps.state.owns(String(args['message_ref'])))) return text('This agent did not send a message with that request_id (or it is older than 8 days); only its own messages can be reacted to by message_ref.', true);
          target = { message_ref: String(args['message_ref']) };
        }
        else if (args['guild_id'] !== undefined && args['destination'] !== undefined && messageId !== undefined) target = { guild_id: String(args['guild_id']), destination: String(args['destination']), message_id: messageId };
        else if (messageId !== undefined) {
          // The DM with the paired user, as send_dm has it: a user who revoked since pairing is not reacted to.
          const pairing = await pairedUser(deps.bridge);
          if ('content' in pairing) return pairing;
          target = { user_id: pairing.user_id, message_id: messageId };
        } else return text('Give message_ref, or guild_id with destination and message_id, or message_id alone for a message in the DM with the paired user (pair first).', true);
        return send(deps, { kind: 'reaction', target, body } as Omit<Schema<'DeliveryRequest'>, 'request_id'>, idOf(args));
      },
    },
    {
      name: 'delete_message',
      operations: ['createDelivery', 'getDelivery', 'getDeliveryDetail', 'getAgentMessage', 'claimAgentRequest', 'releaseAgentRequest'],
      title: 'Delete a message this agent sent',
      description: `Delete a message this agent sent earlier (post_message or send_dm), by the request_id those tools returned. Only this agent's own messages can be deleted; a deleted message cannot be edited. ${NO_RETRY}`,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
      output: 'DeliveryState',
      replay: { key: 'request_id' },
      inputSchema: object(
        {
          message_ref: contractSchema('MessageRef', 'The request_id post_message or send_dm returned.'),
          request_id: contractSchema('RequestId', 'Optional: 64 lowercase hex characters naming this delete (not the message: that is message_ref); the same one again never sends twice. Default: a fresh one.'),
        },
        ['message_ref'],
      ),
      async handler(args, deps) {
        const ref = String(args['message_ref']);
        if ((await deps.state.message(ref)) === undefined) return text('This agent did not send a message with that request_id (or it is older than 8 days); only its own messages can be deleted.', true);
        return send(deps, { kind: 'delete', target: { message_ref: ref } } as Omit<Schema<'DeliveryRequest'>, 'request_id'>, idOf(args));
      },
    },
  ];
}

/** Send with the agent's request_id or a fresh one, then wait (bounded) for delivered or failed. */
async function send(deps: DeliveryToolDeps, request: Omit<Schema<'DeliveryRequest'>, 'request_id'>, given?: string, key = 'request_id'): Promise<CallToolResult> {
  const requestId = given ?? randomBytes(32).toString('hex');
  // Noted as this caller's before Herald sees it: a retry after a lost answer is then its own replay.
  const ours = await deps.state.claim(requestId);
  const accepted = await deps.bridge.call('createDelivery', { body: { ...request, request_id: requestId } as Schema<'DeliveryRequest'> });
  if (!accepted.ok) {
    if (accepted.status === 0) {
      return text(`${unreachable(accepted)} The message may or may not have been stored: check get_delivery with request_id ${requestId} before sending again.`, true);
    }
    if (!ours && accepted.status >= 400 && accepted.status < 500) await deps.state.release(requestId);
    return bridgeError(accepted);
  }
  if (accepted.data.existing && !ours) {
    // Another OAuth client's delivery: not this caller's to replay, nor to see.
    await deps.state.release(requestId);
    return text(`Nothing was sent: that ${key} was used by another sender. Give a fresh one, or none.`, true);
  }
  if (request.kind === 'post' || request.kind === 'dm') await deps.state.rememberMessage(requestId, request.kind);
  const deadline = Date.now() + deps.waitMs;
  let latest: Schema<'DeliveryState'> = accepted.data.state;
  let repostedAt = 0;
  while (latest.state !== 'delivered' && latest.state !== 'failed' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    // `unknown`: Herald could not confirm the send. Re-POSTing the same request_id (the protocol's
    // own retry) makes it settle the doubt and try again; it never creates a second message.
    const repost = latest.state === 'unknown' && Date.now() - repostedAt >= 2_000;
    if (repost) repostedAt = Date.now();
    const r = repost ? await deps.bridge.call('createDelivery', { body: { ...request, request_id: requestId } as Schema<'DeliveryRequest'> }) : await deps.bridge.call('getDelivery', { path: { request_id: requestId } });
    if (r.ok) latest = 'existing' in r.data ? r.data.state : r.data;
  }
  // Whether this call repeated an earlier one is the bridge's first answer (a re-POST above is ours).
  return replayMarked(await describe(latest, requestId, deps.bridge), accepted.data.existing, key, requestId);
}

/** Herald's own words for why a delivery failed or is unknown (the admin view), if it will say. */
async function reasonOf(bridge: BridgeClient, requestId: string): Promise<string | undefined> {
  const r = await bridge.call('getDeliveryDetail', { path: { request_id: requestId } }, { once: true });
  return r.ok ? r.data.reason : undefined;
}

/** Where a person opens the message, when that is not its Discord url (sandbox mode: the sandbox's page). */
async function elsewhere(bridge: BridgeClient, requestId: string, url: string): Promise<string> {
  const r = await bridge.call('getDeliveryDetail', { path: { request_id: requestId } }, { once: true });
  const link = r.ok ? r.data.link : undefined;
  return link === undefined || link === url ? '' : `\nOpen it in the Discord sandbox: ${link}`;
}

/** The advice for a failure, sharpened by Herald's reason where it has one. */
function failureWords(s: Schema<'DeliveryState'> & { state: 'failed' }, reason: string | undefined): string {
  if (reason === 'destination not mapped' && 'destination' in s.target) {
    return `no channel is mapped for the ${s.target.destination} destination in server ${s.target.guild_id}. Do not retry: it fails the same way until the server's operator maps one (\`/destinations set\` in Discord, or Herald's admin API). get_capabilities with that guild_id shows which destinations are mapped.`;
  }
  const advice = FAILURE_ADVICE[s.code] ?? '';
  return reason === undefined ? advice : `${advice} Herald's reason: ${reason}.`;
}

async function describe(s: Schema<'DeliveryState'>, requestId: string, bridge: BridgeClient): Promise<CallToolResult> {
  const what = s.kind === 'post' ? 'Posted' : s.kind === 'dm' ? 'DM sent' : s.kind === 'delete' ? 'Deleted' : s.kind === 'reaction' ? ('remove' in s.body && s.body.remove === true ? 'Reaction removed' : 'Reacted') : 'Edited';
  switch (s.state) {
    case 'delivered':
      if ('applied' in s && s.applied === false) return result(`Not applied: a later edit of that message was already applied, so this older one was skipped. (request_id ${requestId})`, s);
      return result(`${what}: ${s.url}${await elsewhere(bridge, requestId, s.url)}\nrequest_id: ${requestId}`, s);
    case 'failed':
      return { ...result(`Not delivered (${s.code}): ${failureWords(s, await reasonOf(bridge, requestId))}\nrequest_id: ${requestId}`, s), isError: true };
    case 'unknown': {
      const reason = await reasonOf(bridge, requestId);
      return result(
        `Not confirmed yet (state: unknown): Herald could not tell whether Discord showed it, and is not guessing. Do not send it as a new message. Check later with get_delivery, request_id ${requestId}.${reason === undefined ? '' : ` Herald's reason: ${reason}.`}`,
        s,
      );
    }
    default:
      return result(
        `Accepted but not delivered yet (state: ${s.state}). Do not send it again: Herald keeps trying. Check later with get_delivery, request_id ${requestId}.`,
        s,
      );
  }
}

/** A post's `reply_to` and `thread_id` arguments, only those given (a send without them is as before). */
function threadingArgs(args: Record<string, unknown>): { reply_to?: string; thread_id?: string } {
  return {
    ...(typeof args['reply_to'] === 'string' ? { reply_to: args['reply_to'] } : {}),
    ...(typeof args['thread_id'] === 'string' ? { thread_id: args['thread_id'] } : {}),
  };
}
