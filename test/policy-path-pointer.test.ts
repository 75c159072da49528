import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pathParameters } from '../src/infra/http/api.js';
import { defineModule } from '../src/modules/contract.js';
import { MODULES } from '../src/modules/modules.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

// A policy declaration may point into the path (`/path/...`, src/infra/policy/declaration.ts):
// a module whose operation names its channel in the path is held by the operator's channel rule
// like one naming it in the body. Before, the API handed the policy the body and query alone, so
// such a pointer read nothing and the channels rule let every channel through.

const POLICY = `
connector:
  channels: ['#agents']
`;
const ok = { '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } };

describe("a module operation's /path/ policy pointer", { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  const pokes: string[] = [];
  const looks: string[][] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-path-pointer-'));
    await writeFile(path.join(dir, 'policy.yaml'), POLICY);
    const contract = path.join(dir, 'probe.json');
    await writeFile(
      contract,
      JSON.stringify({
        openapi: '3.1.0',
        info: { title: 'probe', version: '1' },
        paths: {
          '/mcp/probe/look': {
            get: {
              operationId: 'lookProbe',
              security: [{ bridgeToken: [] }],
              'x-herald-policy': { access: 'read', tool: 'read_messages', channel: '/query/channel' },
              parameters: [{ name: 'channel', in: 'query', required: true, schema: { type: 'array', items: { type: 'string', maxLength: 40 }, maxItems: 5 } }],
              responses: ok,
            },
          },
          '/mcp/probe/{channel}/poke': {
            post: {
              operationId: 'pokeProbe',
              security: [{ bridgeToken: [] }],
              'x-herald-policy': { access: 'write', tool: 'send_message', channel: '/path/channel' },
              parameters: [{ name: 'channel', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9%#-]{1,40}$' } }],
              responses: ok,
            },
          },
        },
      }),
    );
    const probe = defineModule<undefined>({
      name: 'probe',
      contract,
      start: async () => ({
        gives: undefined,
        operations: [
          () => ({
            pokeProbe: (c) => (pokes.push(String(c.request.params['channel'])), { status: 200, body: {} }),
            lookProbe: (c) => (looks.push(([] as unknown[]).concat(c.request.query['channel']).map(String)), { status: 200, body: {} }),
          }),
        ],
      }),
    });
    h = await startTestHerald({ modules: [...MODULES, probe], env: { HERALD_GATEWAY: 'off', HERALD_POLICY: path.join(dir, 'policy.yaml') } });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const poke = async (channel: string): Promise<{ status: number; json: unknown }> => {
    const r = await fetch(`${h.url}/mcp/probe/${channel}/poke`, { method: 'POST', headers: { authorization: `Bearer ${h.bridgeToken}` } });
    return { status: r.status, json: await r.json() };
  };

  it('a channel outside the rules is refused; agents goes through; the policy reads the value the handler is given', async () => {
    expect(await poke('secret')).toEqual({ status: 403, json: { error: 'refused by policy: channels' } });
    expect(pokes).toEqual([]);
    expect((await poke('agents')).status).toBe(200);
    // The handler is given %23agents as sent, not #agents: the policy judges that same text.
    expect(await poke('%23agents')).toEqual({ status: 403, json: { error: 'refused by policy: channels' } });
    expect(pokes).toEqual(['agents']);
  });

  // A pointer at a list names every item: a module operation taking several channels is judged by
  // each (before, by the first alone, and it acted on them all).
  it('a list of channels is held item by item: agents with secret is refused', async () => {
    const r = await fetch(`${h.url}/mcp/probe/look?channel=agents&channel=secret`, { headers: { authorization: `Bearer ${h.bridgeToken}` } });
    expect({ status: r.status, looks }).toEqual({ status: 403, looks: [] });
    const both = await fetch(`${h.url}/mcp/probe/look?channel=agents&channel=%23agents`, { headers: { authorization: `Bearer ${h.bridgeToken}` } });
    expect({ status: both.status, looks }).toEqual({ status: 200, looks: [['agents', '#agents']] });
  });

  it('pathParameters reads whole-segment parameters, as sent', () => {
    expect(pathParameters('/mcp/probe/{channel}/poke', '/mcp/probe/%23a%2Fb/poke')).toEqual({ channel: '%23a%2Fb' });
    expect(pathParameters('/a/{x}/{y}', '/a/1/2')).toEqual({ x: '1', y: '2' });
  });
});
