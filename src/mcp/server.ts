import { randomBytes } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import type { Logger } from 'pino';
import type { BridgeClient, BridgeResult, DeliveryRequest, DeliveryState } from '../client/bridge-client.js';
import { withUtf16Lengths } from '../platform/contract/ajv.js';
import type { McpState } from './state.js';
import { FAILURE_ADVICE, toolDefinitions } from './tools.js';

export interface McpServerDeps {
  bridge: BridgeClient;
  state: McpState;
  /** How long a sending tool waits for delivered/failed. */
  waitMs: number;
  log: Logger;
}

type Args = Record<string, unknown>;
type Body = { content?: string; card?: unknown; links?: unknown };

const text = (t: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });

let compiled: Map<string, ValidateFunction> | undefined;

/** Input validators, compiled once per process (Streamable HTTP builds a server per request). */
function toolValidators(): Map<string, ValidateFunction> {
  if (compiled === undefined) {
    const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false }));
    compiled = new Map(toolDefinitions().map((t) => [t.name, ajv.compile(t.inputSchema)]));
  }
  return compiled;
}

/** Herald's MCP server (official SDK): the bridge's protocol as tools an agent can call. */
export function createMcpServer(deps: McpServerDeps): Server {
  const tools = toolDefinitions();
  const validators = toolValidators();
  const server = new Server({ name: 'herald', version: '0.1.0' }, { capabilities: { tools: {} } });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Args;
    const validate = validators.get(name);
    if (validate === undefined) return text(`Unknown tool ${name}.`, true);
    if (!validate(args)) {
      const e = validate.errors?.[0];
      return text(`Invalid arguments: ${e?.instancePath || '(input)'} ${e?.message ?? 'is invalid'}.`, true);
    }
    try {
      return await call(name, args, deps);
    } catch (err) {
      deps.log.error({ tool: name, err: err instanceof Error ? err.message : String(err) }, 'tool failed');
      return text('Something went wrong inside the Herald MCP server; nothing more is known to have been sent.', true);
    }
  });
  return server;
}

async function call(name: string, args: Args, deps: McpServerDeps): Promise<CallToolResult> {
  const { bridge, state } = deps;
  switch (name) {
    case 'get_capabilities': {
      const r = await bridge.capabilities();
      if (!r.ok) return bridgeError(r);
      const c = r.data;
      const lines = [
        `Posts: ${c.targeted_post ? 'yes' : 'no'}. DMs: ${c.dm ? 'yes' : 'no'}. Edits: ${c.edit ? 'yes' : 'no'}.`,
        'Destinations:',
        ...c.destinations.map((d) => `- ${d.destination}: ${d.description}`),
      ];
      return text(lines.join('\n'));
    }
    case 'list_recipients': {
      const r = await bridge.recipients();
      if (!r.ok) return bridgeError(r);
      if (r.data.items.length === 0) return text('No one is registered yet; a user runs `/agent register` in Discord.');
      return text(r.data.items.map((i) => `- ${i.display_name} (${i.user_id})`).join('\n'));
    }
    case 'pair': {
      const r = await bridge.redeem(String(args['code']));
      if (!r.ok) return r.status === 404 ? text('That code is invalid, expired or already used. Ask the user to run `/agent pair` again and give you the new code.', true) : bridgeError(r);
      await state.setPairing(r.data.discord_user_id, r.data.generation);
      return text(`Paired with Discord user ${r.data.discord_user_id}. send_dm now reaches them.`);
    }
    case 'get_delivery': {
      const r = await bridge.getDelivery(String(args['request_id']));
      if (!r.ok) return r.status === 404 ? text('No delivery with that request_id (records are kept 8 days).', true) : bridgeError(r);
      return describe(r.data, String(args['request_id']));
    }
    case 'post_message':
      return send(deps, {
        kind: 'post',
        target: { guild_id: String(args['guild_id']), destination: args['destination'] as 'alerts' },
        body: bodyOf(args) as { content: string },
      });
    case 'send_dm': {
      const pairing = state.pairing;
      if (pairing === undefined) return text('Not paired with anyone yet. Ask the user to run `/agent pair` in Discord and call pair with the code.', true);
      const reg = await bridge.registration(pairing.user_id);
      if (!reg.ok && reg.status === 404) return text('The paired user has unregistered (`/agent unregister`): DMs are revoked. They must `/agent register` and `/agent pair` again, then call pair.', true);
      if (!reg.ok) return bridgeError(reg);
      if (reg.data.generation !== pairing.generation) {
        return text('The paired user revoked access and registered again since pairing. Refusing to DM until you pair again: ask them to run `/agent pair` and call pair with the code.', true);
      }
      return send(deps, { kind: 'dm', target: { user_id: pairing.user_id }, body: bodyOf(args) as { content: string } });
    }
    case 'edit_message': {
      const ref = String(args['message_ref']);
      const body = bodyOf(args);
      if (body.content === undefined && body.card === undefined && body.links === undefined) return text('Include at least one of content, card or links.', true);
      if (state.message(ref) === undefined) return text('This agent did not send a message with that request_id (or it is older than 8 days); only its own messages can be edited.', true);
      const seq = await state.nextSeq(ref);
      return send(deps, { kind: 'edit', target: { message_ref: ref, seq }, body: body as { content: string } });
    }
    default:
      return text(`Unknown tool ${name}.`, true);
  }
}

function bodyOf(args: Args): Body {
  const body: Body = {};
  if (args['content'] !== undefined) body.content = String(args['content']);
  if (args['card'] !== undefined) body.card = args['card'];
  if (args['links'] !== undefined) body.links = args['links'];
  return body;
}

/** Send with a fresh request_id, then wait (bounded) for delivered or failed. */
async function send(deps: McpServerDeps, request: Omit<DeliveryRequest, 'request_id'>): Promise<CallToolResult> {
  const requestId = randomBytes(32).toString('hex');
  const accepted = await deps.bridge.createDelivery({ ...request, request_id: requestId } as DeliveryRequest);
  if (!accepted.ok) {
    if (accepted.status === 0) {
      return text(`Herald could not be reached. The message may or may not have been stored: check get_delivery with request_id ${requestId} before sending again.`, true);
    }
    return bridgeError(accepted);
  }
  if (request.kind !== 'edit') await deps.state.rememberMessage(requestId, request.kind);
  const deadline = Date.now() + deps.waitMs;
  let latest: DeliveryState = accepted.data.state;
  let repostedAt = 0;
  while (latest.state !== 'delivered' && latest.state !== 'failed' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    // `unknown`: Herald could not confirm the send. Re-POSTing the same request_id (the protocol's
    // own retry) makes it settle the doubt and try again; it never creates a second message.
    const repost = latest.state === 'unknown' && Date.now() - repostedAt >= 2_000;
    if (repost) repostedAt = Date.now();
    const r = repost ? await deps.bridge.createDelivery({ ...request, request_id: requestId } as DeliveryRequest) : await deps.bridge.getDelivery(requestId);
    if (r.ok) latest = 'existing' in r.data ? r.data.state : r.data;
  }
  return describe(latest, requestId);
}

function describe(s: DeliveryState, requestId: string): CallToolResult {
  const what = s.kind === 'post' ? 'Posted' : s.kind === 'dm' ? 'DM sent' : 'Edited';
  switch (s.state) {
    case 'delivered':
      if ('applied' in s && s.applied === false) return text(`Not applied: a later edit of that message was already applied, so this older one was skipped. (request_id ${requestId})`);
      return text(`${what}: ${s.url}\nrequest_id: ${requestId}`);
    case 'failed':
      return text(`Not delivered (${s.code}): ${FAILURE_ADVICE[s.code] ?? ''}\nrequest_id: ${requestId}`, true);
    case 'unknown':
      return text(
        `Not confirmed yet (state: unknown): Herald could not tell whether Discord showed it, and is not guessing. Do not send it as a new message. Check later with get_delivery, request_id ${requestId}; the operator can see why in Herald's log.`,
      );
    default:
      return text(
        `Accepted but not delivered yet (state: ${s.state}). Do not send it again: Herald keeps trying. Check later with get_delivery, request_id ${requestId}.`,
      );
  }
}

function bridgeError(r: BridgeResult<unknown> & { ok: false }): CallToolResult {
  if (r.status === 0) return text('Herald could not be reached; try again later.', true);
  if (r.status === 401 || r.status === 503) return text(`Herald refused this MCP server's credentials (${r.error}); the operator must set MCP_BRIDGE_TOKEN for both.`, true);
  return text(`Herald refused the request: ${r.error}.`, true);
}
