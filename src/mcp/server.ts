import { readFileSync } from 'node:fs';
import { fromJsonSchema, ProtocolError, ProtocolErrorCode, ResourceNotFoundError, Server, SUPPORTED_PROTOCOL_VERSIONS, type CallToolResult, type Tool } from '@modelcontextprotocol/server';
import { Ajv, type ValidateFunction } from 'ajv';
import { withCallHeaders } from '../client/bridge-client.js';
import { parseTraceparent, type TraceContext } from '../infra/trace.js';
import { taskOf, taskState, TASK_TOOLS, TASKS_EXTENSION, type TaskTool } from './tasks.js';
import { withUtf16Lengths } from '../infra/contract/ajv.js';
import { SchemaReasons } from '../infra/contract/reasons.js';
import { unstorableField } from '../infra/contract/storable.js';
import { contractOutput, text, type McpTool } from '../infra/mcp/tool.js';
import type { McpServerDeps } from './deps.js';
import type { Caller, McpPolicy } from './policy.js';
import { mcpTools } from './tools.js';
import { inboxUri } from './inbox-notify.js';
import { errorSummary } from '../infra/errors.js';
import { LOCAL_PATH } from '../modules/deliveries/delivery.tool-files.js';

export type { McpServerDeps };

/** A tool's compiled checks: its input, and its structured result (the contract's response schema). */
interface Compiled {
  tool: McpTool<McpServerDeps>;
  listed: Tool;
  /** As listed where no `{path}` is read (HTTP without HERALD_MCP_FILES_DIR): without the path properties. */
  listedWithoutPaths: Tool;
  /** Compiled on first use: a process answers a few tools, and compiling all of them cost about half a CPU-second at start. */
  readonly input: ValidateFunction;
  readonly output: ValidateFunction;
}

/** A validator compiled by `compile` the first time it is read. */
function compiledOnUse(compile: () => ValidateFunction): () => ValidateFunction {
  let fn: ValidateFunction | undefined;
  return () => (fn ??= compile());
}

let compiled: Map<string, Compiled> | undefined;
/** Says which argument is wrong, and how, when a validator refuses the input. */
const reasons = new SchemaReasons();

/**
 * Every tool as MCP lists it (title, annotations, input and output schemas from the contract) with
 * its validators, each compiled once per process on first use (Streamable HTTP builds a server per request).
 */
function compiledTools(): Map<string, Compiled> {
  if (compiled === undefined) {
    const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateFormats: false }));
    compiled = new Map(
      mcpTools().map((tool) => {
        const outputSchema = tool.replay !== undefined && 'key' in tool.replay ? withReplayed(contractOutput(tool.output, tool.contract)) : contractOutput(tool.output, tool.contract);
        const listed: Tool = { name: tool.name, title: tool.title, description: withReissue(tool), inputSchema: localPaths(tool.inputSchema, true) as Tool['inputSchema'], outputSchema, annotations: { title: tool.title, ...tool.annotations } };
        const listedWithoutPaths: Tool = { ...listed, inputSchema: localPaths(tool.inputSchema, false) as Tool['inputSchema'] };
        const input = compiledOnUse(() => ajv.compile(tool.inputSchema));
        const output = compiledOnUse(() => ajv.compile(outputSchema));
        const entry: Compiled = {
          tool,
          listed,
          listedWithoutPaths,
          get input() {
            return input();
          },
          get output() {
            return output();
          },
        };
        return [tool.name, entry];
      }),
    );
  }
  return compiled;
}

/**
 * A tool's description, and for a tool with a replay key what to do when its answer is lost: a
 * broken stream loses the call in flight (2026-07-28 has no resumption; the client sends it again
 * under a new JSON-RPC id), and only the same key makes that second call the same one.
 */
export function withReissue(tool: Pick<McpTool<McpServerDeps>, 'description' | 'replay'>): string {
  if (tool.replay === undefined || !('key' in tool.replay)) return tool.description;
  const { key } = tool.replay;
  return `${tool.description} If a call breaks off before its answer (the connection or stream dropped), call it again with the same arguments and the same ${key}, so give your own ${key} from the first call: the second answer then says it replayed, and nothing is done twice.`;
}

/** What a tool with a replay key answers beside the contract's schema: whether this call was a replay. */
const REPLAYED = { type: 'boolean', description: 'True when this call repeated an earlier one (the same key): nothing new was sent.' } as const;

/** A copy of an output schema (an object, or a oneOf of objects) with a required `replayed`. */
function withReplayed<S extends Record<string, unknown>>(schema: S): S {
  const oneOf = schema['oneOf'];
  if (Array.isArray(oneOf)) return { ...schema, oneOf: oneOf.map((b: Record<string, unknown>) => withReplayed(b)) };
  const required = Array.isArray(schema['required']) ? (schema['required'] as string[]) : [];
  return { ...schema, properties: { ...((schema['properties'] as object | undefined) ?? {}), replayed: REPLAYED }, required: required.includes('replayed') ? required : [...required, 'replayed'] };
}

/**
 * A tool's input schema as listed: the properties marked as a local path (a file on the server's
 * disk, LOCAL_PATH) kept where this server reads paths, dropped where it reads none; the mark itself
 * never listed.
 */
function localPaths(node: unknown, keep: boolean): unknown {
  if (Array.isArray(node)) return node.map((n) => localPaths(n, keep));
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === LOCAL_PATH) continue;
    if (k === 'properties' && typeof v === 'object' && v !== null) {
      const props = Object.entries(v as Record<string, unknown>).filter(([, p]) => keep || (p as Record<string, unknown> | null)?.[LOCAL_PATH] !== true);
      out[k] = Object.fromEntries(props.map(([name, p]) => [name, localPaths(p, keep)]));
    } else out[k] = localPaths(v, keep);
  }
  return out;
}

/** Every tool as MCP lists it (`paths`: where this server reads a `{path}`; default yes, as stdio does). */
export function listedTools(paths = true): Tool[] {
  return [...compiledTools().values()].map((c) => (paths ? c.listed : c.listedWithoutPaths));
}

/** The `confirm_token` argument the operator's policy adds to a tool that needs a confirming call. */
const CONFIRM_TOKEN = {
  type: 'string',
  minLength: 1,
  description: "The operator's policy asks for a second, confirming call: the confirm_token the first call answered (with the same arguments), to go ahead.",
} as const;

/** A tool as listed to a caller who must confirm it: with a `confirm_token` argument. */
function withConfirm(listed: Tool): Tool {
  const properties = (listed.inputSchema.properties ?? {}) as Record<string, object>;
  return { ...listed, inputSchema: { ...listed.inputSchema, properties: { ...properties, confirm_token: CONFIRM_TOKEN } } };
}

/**
 * The MCP revisions Herald speaks: 2026-07-28 (stateless: each request carries its version and
 * capabilities in `_meta`) to a client that asks for it, and the 2025 handshake revisions, back to
 * 2024-10-07, to every other client (the v2 SDK's own list).
 */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';
export const PROTOCOL_VERSIONS: readonly string[] = [MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS];

let version: string | undefined;

/** Herald's version, from its package.json (one folder up from src/, two from dist/src/), read once. */
export function heraldVersion(): string {
  if (version === undefined) {
    version = 'unknown';
    for (const relative of ['../../package.json', '../../../package.json']) {
      try {
        const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
        if (pkg.name === 'herald' && typeof pkg.version === 'string') {
          version = pkg.version;
          break;
        }
      } catch {
        // Not this folder: try the next.
      }
    }
  }
  return version;
}

/** What `server/discover` (and a 2025 `initialize`) tells a client about Herald, before any tool. */
export const INSTRUCTIONS =
  "Herald is a chat bridge: these tools post, edit and react in the chat channels and direct messages its operator mapped, and read the agent's inbox (what people wrote to it), acknowledged with ack_inbox once handled. Every tool that writes takes a request_id: if a call breaks off before its answer (a dropped connection or stream), call it again with the same arguments and the same request_id; the answer then says it replayed, and nothing is sent twice.";

/**
 * Cache hints on 2026-07-28 results (ttlMs, cacheScope): discovery is the same for every caller
 * for an hour; the tool list is the caller's own (the operator's policy filters it and adds
 * confirm_token per caller), so private, and short-lived so a policy change shows soon.
 */
const CACHE_HINTS = {
  'server/discover': { ttlMs: 3_600_000, cacheScope: 'public' },
  'tools/list': { ttlMs: 60_000, cacheScope: 'private' },
  'resources/list': { ttlMs: 60_000, cacheScope: 'private' },
  'resources/read': { ttlMs: 0, cacheScope: 'private' },
} as const;

/** Whether a caller may read its inbox (list_inbox is listed to it): what its inbox resource and a listen to it need. */
export function inboxReadable(access: Pick<McpServerAccess, 'policy' | 'caller'> | undefined): boolean {
  const inbox = compiledTools().get('list_inbox');
  return access === undefined || (inbox !== undefined && access.policy.listed(inbox.tool, access.caller));
}

/** Who calls, and the operator's policy for them (src/mcp/policy.ts); without it, every tool for everyone. */
export interface McpServerAccess {
  policy: McpPolicy;
  caller: Caller;
  /** A session outliving its caller's token (HTTP+SSE): true once the token has expired; every call then refused. */
  lapsed?: () => boolean;
  /** What a confirmed call runs with: the same, its bridge calls carrying the confirm token (Herald checks and uses it). */
  confirmed?(confirmToken: string): McpServerDeps;
}

/**
 * Herald's MCP server (official SDK). The low-level `Server` rather than `McpServer.registerTool`:
 * registerTool takes zod schemas, and Herald's schemas are the contract's JSON Schemas (openapi/),
 * written once; this server gives the same guarantees itself: it lists each tool's output schema,
 * validates every input against the input schema and checks every structured result against the
 * output schema.
 */
export function createMcpServer(deps: McpServerDeps, access?: McpServerAccess, era: 'legacy' | 'modern' = 'legacy'): Server {
  const tools = compiledTools();
  const paths = deps.localFiles !== undefined && deps.localFiles.kind !== 'none';
  const shown = (c: Compiled): Tool => (paths ? c.listed : c.listedWithoutPaths);
  const listed = access === undefined ? listedTools(paths) : [...tools.values()].filter((c) => access.policy.listed(c.tool, access.caller)).map((c) => (access.policy.needsConfirm(c.tool, access.caller) ? withConfirm(shown(c)) : shown(c)));
  // logging: the 2025 revisions' inbox notifications (src/mcp/inbox-notify.ts) are log messages a
  // client may act on. 2026-07-28 has no such channel: there the caller's inbox is a resource to
  // listen to (subscriptions/listen), and the tasks extension serves a scrape as a task to a
  // client that declares it (src/mcp/tasks.ts). The 2025 revisions see neither.
  const resources = era === 'modern' ? { resources: { subscribe: true }, extensions: { [TASKS_EXTENSION]: {} } } : {};
  const server = new Server({ name: 'herald', version: heraldVersion() }, { capabilities: { tools: {}, logging: {}, ...resources }, supportedProtocolVersions: [...PROTOCOL_VERSIONS], instructions: INSTRUCTIONS, cacheHints: { ...CACHE_HINTS } });

  server.setRequestHandler('tools/list', () => ({ tools: listed }));
  if (era === 'modern') {
    // The caller's own inbox only: another reader's URI is no resource of this caller's.
    const inbox = inboxUri(access?.caller.client);
    const description = 'What people wrote to this agent, after its acknowledged cursor, as list_inbox answers it. Listen to it (subscriptions/listen) to be told of each new event; then read it (here, list_inbox or wait_for_messages) and acknowledge with ack_inbox.';
    // Only to a caller who may read it (list_inbox listed to it by the operator's policy).
    const readable = inboxReadable(access);
    server.setRequestHandler('resources/list', () => ({ resources: readable ? [{ uri: inbox, name: 'inbox', title: 'Inbox', description, mimeType: 'application/json' }] : [] }));
    server.setRequestHandler('resources/read', async (request) => {
      if (!readable || request.params.uri !== inbox) throw new ResourceNotFoundError(request.params.uri, `No resource ${request.params.uri}: this caller's inbox is ${inbox}.`);
      const r = await deps.bridge.call('listInbox', {});
      if (!r.ok) throw new Error(`Herald did not answer the inbox: ${r.error}`);
      return { contents: [{ uri: inbox, mimeType: 'application/json', text: JSON.stringify(r.data) }] };
    });
  }
  /** One tool call, every check applied (expiry, input, the operator's policy), as tools/call and tasks/* make it. */
  /**
   * `signal`: aborts when the client that made the call went away (a cut stream, a cancel): the
   * wait tools end their long poll on Herald with it; writes do not look at it (src/mcp/deps.ts).
   */
  const call = async (name: string, given: Record<string, unknown>, trace: TraceContext | undefined, signal?: AbortSignal): Promise<CallToolResult> => {
    const log = trace === undefined ? deps.log : deps.log.child({ trace_id: trace.trace_id, span_id: trace.span_id });
    const run = <T>(fn: () => Promise<T>): Promise<T> => (trace === undefined ? fn() : withCallHeaders({ traceparent: trace.traceparent }, fn));
    let args: Record<string, unknown> = given;
    // Checked on every call, not once when the session opened: a session whose token expired does nothing.
    if (access?.lapsed?.() === true) return text('Refused: the access token this session was opened with has expired. Connect again with a fresh token.', true);
    const entry = tools.get(name);
    if (entry === undefined) return text(`Unknown tool ${name}.`, true);
    // The one input gate (src/infra/contract/storable.ts): text no store can hold goes no further, whatever the tool.
    const unfit = unstorableField({}, args);
    if (unfit !== undefined) return text(`Invalid arguments: ${unfit.replace(/^a key of the request body/, "an argument's name")}.`, true);
    const { tool } = entry;
    // The policy's `confirm_token` argument is the policy's, not the tool's.
    let confirmToken: string | undefined;
    if (access?.policy.needsConfirm(tool, access.caller) === true && 'confirm_token' in args) {
      const { confirm_token: given, ...rest } = args;
      confirmToken = typeof given === 'string' ? given : undefined;
      args = rest;
    }
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
    // One line per call: the tool, its request_id (the call's key, what a re-issue repeats), the trace.
    const key = tool.replay !== undefined && 'key' in tool.replay ? tool.replay.key : 'request_id';
    const requestId = typeof args[key] === 'string' ? args[key] : undefined;
    log.info({ tool: name, ...(requestId === undefined ? {} : { [key]: requestId }) }, 'tool call');
    try {
      const verdict = access?.policy.check(tool, access.caller, args, confirmToken);
      const confirmed = verdict !== undefined && 'confirmed' in verdict && typeof verdict['confirmed'] === 'string' ? verdict['confirmed'] : undefined;
      if (verdict !== undefined && confirmed === undefined) return verdict as CallToolResult;
      const given = { ...(confirmed === undefined ? deps : (access?.confirmed?.(confirmed) ?? deps)), log, signal };
      // The admin tier only for a caller the operator's targets and caps do not hold (src/mcp/policy.ts).
      const result = await run(() => tool.handler(args, access === undefined || access.policy.adminTier(access.caller) ? given : { ...given, admin: undefined }));
      // A structured result the contract does not describe is Herald's bug: said in the log, never hidden.
      if (result.structuredContent !== undefined && !entry.output(result.structuredContent)) {
        log.error({ tool: name, errors: entry.output.errors?.slice(0, 3) }, 'tool result does not match its output schema');
      }
      // The SDK's projection of a result onto the revision this connection speaks (every output schema here has an object root).
      return server.projectCallToolResult(result, entry.listed.outputSchema);
    } catch (err) {
      log.error({ tool: name, err: errorSummary(err) }, 'tool failed');
      return text('Something went wrong inside the Herald MCP server; nothing more is known to have been sent.', true);
    }
  };
  // The caller's W3C trace context (2026-07-28 `_meta.traceparent`; a 2025 client may send it
  // too): its trace id on this server's log lines for the call, and the header on the call's
  // bridge requests, so Herald's request log carries the same id. Malformed: no trace, not echoed.
  const traceOf = (ctx: { mcpReq: { _meta?: Record<string, unknown> | undefined } }, params: { _meta?: Record<string, unknown> | undefined }): TraceContext | undefined => parseTraceparent(ctx.mcpReq._meta?.['traceparent'] ?? params._meta?.['traceparent']);

  server.setRequestHandler('tools/call', async (request, ctx): Promise<CallToolResult> => {
    const { name } = request.params;
    const result = await call(name, request.params.arguments ?? {}, traceOf(ctx, request.params), ctx.mcpReq.signal);
    // A tool served as a task (src/mcp/tasks.ts), to a 2026-07-28 client that declared the tasks
    // extension on this request, its job still running: the task, polled with tasks/get.
    const kind = TASK_TOOLS.get(name);
    const declared = (ctx.mcpReq.envelope as { [k: string]: { extensions?: Record<string, unknown> } | undefined } | undefined)?.['io.modelcontextprotocol/clientCapabilities']?.extensions?.[TASKS_EXTENSION] !== undefined;
    const id = kind === undefined || result.isError === true || typeof result.structuredContent !== 'object' || result.structuredContent === null ? undefined : kind.id(result.structuredContent as Record<string, unknown>);
    if (era !== 'modern' || !declared || kind === undefined || id === undefined) return result;
    const task = taskState(kind, `${kind.prefix}${id}`, result);
    if (task.status !== 'working') return result;
    // The content is a fallback for a client that reads only words.
    const { result: _none, ...fields } = task;
    return { resultType: 'task', ...fields, content: [{ type: 'text', text: `Started task ${task.taskId} (${task.statusMessage ?? task.status}). Poll tasks/get with this taskId; tasks/cancel stops it.` }] } as unknown as CallToolResult;
  });

  if (era === 'modern') {
    const taskParams = fromJsonSchema<{ taskId: string; _meta?: Record<string, unknown> }>({ type: 'object', properties: { taskId: { type: 'string', minLength: 1 } }, required: ['taskId'] });
    /** The job a task names, read (or stopped) by its tool, with the caller's policy; a refusal or an unknown job is no such task. */
    const job = async (tool: 'get' | 'cancel', params: { taskId: string; _meta?: Record<string, unknown> }, ctx: { mcpReq: { _meta?: Record<string, unknown> | undefined } }): Promise<{ kind: TaskTool; answer: CallToolResult }> => {
      const named = taskOf(params.taskId);
      if (named === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid params: taskId: no task ${params.taskId} (a task id is what a tool call answered as its taskId).`);
      const answer = await call(named.kind[tool], { [named.kind.idArg]: named.id }, traceOf(ctx, params));
      const words = answer.content.map((c) => (c.type === 'text' ? c.text : '')).join(' ');
      if (answer.isError === true) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid params: taskId: ${params.taskId}: ${words}`);
      return { kind: named.kind, answer };
    };
    server.setRequestHandler('tasks/get', { params: taskParams }, async (params, ctx) => {
      const { kind, answer } = await job('get', params, ctx);
      return taskState(kind, params.taskId, answer) as unknown as Record<string, unknown>;
    });
    server.setRequestHandler('tasks/cancel', { params: taskParams }, async (params, ctx) => {
      await job('cancel', params, ctx);
      return {};
    });
  }
  return server;
}
