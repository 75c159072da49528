import type { Context as KoaContext } from 'koa';
import type { Kysely } from 'kysely';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { policyCheck, uploadCapsOf } from '../src/infra/http/policy.middleware.js';
import { argumentsHash, confirmKey, ConfirmTokens } from '../src/infra/policy/confirm.js';
import { DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES, NO_POLICY, parsePolicy } from '../src/infra/policy/policy.js';

/** A request as the API middleware hands it to the policy: who authenticated, its headers. */
function request(headers: Record<string, string> = {}): KoaContext {
  return { state: { authenticated: 'bridge' }, get: (name: string) => headers[name.toLowerCase()] ?? '' } as unknown as KoaContext;
}

const check = (policy = NO_POLICY) => policyCheck({ policy, db: undefined as unknown as Kysely<unknown>, registry: new Registry(), confirmKey: confirmKey('bridge token') });

describe('the policy engine (src/infra/http/policy.middleware.ts)', () => {
  it('refuses an operation that declares no intent: a new one cannot slip past the rules', async () => {
    const refused = await check()(request(), 'somethingNew', { operationId: 'somethingNew' }, {});
    expect(refused).toEqual({ status: 403, body: { error: 'refused by policy: tools' } });
  });

  it('gives an OAuth client without rules of its own the default upload cap, with no policy file at all', async () => {
    const ctx = request({ 'x-herald-policy-client': 'stranger' });
    expect(await check()(ctx, 'uploadFile', { 'x-herald-policy': { access: 'write', also_for: ['post_message'] } }, {})).toBeUndefined();
    expect(uploadCapsOf(ctx)).toEqual([
      { subject: 'connector', maxTotalBytes: undefined },
      { subject: 'client:stranger', maxTotalBytes: DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES },
    ]);
  });

  it("takes the policy file's files.max_total_bytes for a client", async () => {
    const policy = parsePolicy('clients:\n  small:\n    files: { max_total_bytes: 10 }\n', 'p.yaml', { tools: [], platforms: [] });
    const ctx = request({ 'x-herald-policy-client': 'small' });
    await check(policy)(ctx, 'uploadFile', { 'x-herald-policy': { access: 'write', also_for: ['post_message'] } }, {});
    expect(uploadCapsOf(ctx)[1]).toEqual({ subject: 'client:small', maxTotalBytes: 10 });
  });
});

describe('confirm tokens (src/infra/policy/confirm.ts)', () => {
  const binding = { subject: 'client:a', what: 'tool:post_message', args: argumentsHash({ b: 1, a: [1, { y: 2, x: 1 }] }) };
  it('verify only a token bound to the same caller, call and arguments, before it expires', () => {
    let now = 1_000_000;
    const tokens = new ConfirmTokens(confirmKey('k'), undefined, () => now);
    const { token } = tokens.mint(binding);
    expect('tokenId' in tokens.verify(token, { ...binding, args: argumentsHash({ a: [1, { x: 1, y: 2 }], b: 1 }) })).toBe(true);
    expect(tokens.verify(token, { ...binding, subject: 'client:b' })).toEqual({ problem: 'invalid' });
    expect(tokens.verify(token, { ...binding, args: argumentsHash({ b: 2 }) })).toEqual({ problem: 'invalid' });
    expect(new ConfirmTokens(confirmKey('another key'), undefined, () => now).verify(token, binding)).toEqual({ problem: 'invalid' });
    expect(tokens.verify(`${token}x`, binding)).toEqual({ problem: 'invalid' });
    now += 5 * 60_000;
    expect(tokens.verify(token, binding)).toEqual({ problem: 'expired' });
  });
});

describe("herald mcp's read caps (src/mcp/policy.ts)", () => {
  it('counts each principal for itself: the connector, a listed client and an unlisted one each get the cap', async () => {
    const { McpPolicy } = await import('../src/mcp/policy.js');
    const { mcpTools } = await import('../src/mcp/tools.js');
    const tool = mcpTools().find((t) => t.name === 'list_recipients');
    if (tool === undefined) throw new Error('no list_recipients tool');
    const policy = parsePolicy('connector:\n  rate:\n    list_recipients: { per_minute: 1 }\nclients:\n  listed:\n    read_only: true\n', 'p.yaml', { tools: ['list_recipients'], platforms: [] });
    const mcp = new McpPolicy(policy);
    for (const caller of [{}, { client: 'listed' }, { client: 'unlisted' }, { client: 'another' }]) {
      expect(mcp.check(tool, caller), JSON.stringify(caller)).toBeUndefined();
      expect(JSON.stringify(mcp.check(tool, caller)), JSON.stringify(caller)).toContain('rate_per_minute');
    }
  });
});

/** An input with `value` at a JSON pointer such as /body/kind. */
function inputAt(pointer: string, value: string): Record<string, unknown> {
  const keys = pointer.slice(1).split('/');
  return keys.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>;
}

describe('every tool ↔ its routes: one policy entry gates both', () => {
  it('under `tools: [T]`, for the connector and for a client, exactly the operations serving T pass, and T can call each of its own', async () => {
    const { mcpTools } = await import('../src/mcp/tools.js');
    const { contractOf } = await import('../src/modules/http-api.js');
    const { MODULES } = await import('../src/modules/modules.js');
    const { declarationOf, toolsNamed } = await import('../src/infra/policy/declaration.js');
    const bundle = contractOf(MODULES).document as { security: Record<string, unknown>[]; paths: Record<string, Record<string, { operationId?: string; security?: Record<string, unknown>[] }>> };
    const operations = Object.values(bundle.paths)
      .flatMap((item) => Object.values(item))
      .filter((op) => typeof op === 'object' && typeof op.operationId === 'string' && (op.security ?? bundle.security).some((s) => 'bridgeToken' in s));
    const tools = mcpTools();
    expect(operations.length).toBeGreaterThan(30);
    const problems: string[] = [];
    for (const tool of tools) {
      const rules = `tools: [${tool.name}]`;
      const policy = parsePolicy(`connector:\n  ${rules}\nclients:\n  only:\n    ${rules}\n`, 'p.yaml', { tools: tools.map((t) => t.name), platforms: [] });
      for (const headers of [{}, { 'x-herald-policy-client': 'only' }, { 'x-herald-policy-client': 'unlisted' }]) {
        for (const op of operations) {
          // An operation that is a tool by a value of its input (a send's kind): the value that makes it this tool, else its first.
          const by = declarationOf(op).declaration?.tool;
          const input = typeof by === 'object' ? inputAt(by.by, Object.entries(by.values).find(([, t]) => t === tool.name)?.[0] ?? Object.keys(by.values)[0] ?? '') : {};
          const refused = await check(policy)(request(headers), op.operationId, op, input);
          const serves = toolsNamed(declarationOf(op).declaration ?? { access: 'admin' }).includes(tool.name);
          const off = JSON.stringify(refused?.body) === '{"error":"refused by policy: tools"}';
          if (serves === off) problems.push(`${op.operationId} under tools: [${tool.name}] ${JSON.stringify(headers)}: ${off ? 'refused' : 'let through'}`);
          if (tool.operations.includes(op.operationId ?? '') && off) problems.push(`${tool.name} calls ${op.operationId}, refused under its own tools rule`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
