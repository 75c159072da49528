import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestHerald, type TestHerald } from './support/herald.js';

// The operator's policy runs before the input gate (src/infra/http/api.ts): whatever it computes
// from a body an agent wrote must hold for any JSON the body limit lets in, nested thousands deep
// included (64 KiB of `[` is 30,000 levels), and answer a 4xx, never a 500.

const POLICY = `
connector:
  confirm: [send_message]
`;

describe("the operator's policy on a deeply nested body", { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-deep-'));
    await writeFile(path.join(dir, 'policy.yaml'), POLICY);
    h = await startTestHerald({ env: { HERALD_GATEWAY: 'off', HERALD_POLICY: path.join(dir, 'policy.yaml') } });
  });
  afterAll(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const send = (extra: string): Promise<Response> =>
    fetch(`${h.url}/mcp/chat/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.bridgeToken}`, 'content-type': 'application/json' },
      body: `{"channel":"#agents","text":"hello","sender":"ada","extra":${extra}}`,
    });

  it('a body nested 30,000 deep under a confirm rule is answered 428 or 400, not 500', async () => {
    const depth = 30_000;
    const r = await send(`${'['.repeat(depth)}${']'.repeat(depth)}`);
    expect([400, 428]).toContain(r.status);
    const objects = await send(`${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`);
    expect([400, 428]).toContain(objects.status);
  });
});

describe('argumentsHash', () => {
  it('is the hash of the canonical JSON it always was (sorted keys, undefined members left out)', async () => {
    const { createHash } = await import('node:crypto');
    const { argumentsHash } = await import('../src/infra/policy/confirm.js');
    const text = '{"a":[1,"x",null,{"b":true,"c":null}],"z":{"y":[],"x":{}}}';
    const canonical = '{"a":[1,"x",null,{"b":true,"c":null}],"z":{"x":{},"y":[]}}';
    expect(argumentsHash(JSON.parse(text))).toBe(createHash('sha256').update(canonical).digest('base64url'));
    expect(argumentsHash({ b: undefined, a: [undefined, 2] })).toBe(createHash('sha256').update('{"a":[null,2]}').digest('base64url'));
    expect(argumentsHash('s')).toBe(createHash('sha256').update('"s"').digest('base64url'));
  });
});
