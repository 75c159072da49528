import type { Context as KoaContext } from 'koa';
import type { Kysely } from 'kysely';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { policyCheck, uploadCapsOf } from '../src/platform/http/policy.middleware.js';
import { argumentsHash, confirmKey, ConfirmTokens } from '../src/platform/policy/confirm.js';
import { DEFAULT_CLIENT_FILES_MAX_TOTAL_BYTES, NO_POLICY, parsePolicy } from '../src/platform/policy/policy.js';

/** A request as the API middleware hands it to the policy: who authenticated, its headers. */
function request(headers: Record<string, string> = {}): KoaContext {
  return { state: { authenticated: 'bridge' }, get: (name: string) => headers[name.toLowerCase()] ?? '' } as unknown as KoaContext;
}

const check = (policy = NO_POLICY) => policyCheck({ policy, db: undefined as unknown as Kysely<unknown>, registry: new Registry(), confirmKey: confirmKey('bridge token') });

describe('the policy engine (src/platform/http/policy.middleware.ts)', () => {
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

describe('confirm tokens (src/platform/policy/confirm.ts)', () => {
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
