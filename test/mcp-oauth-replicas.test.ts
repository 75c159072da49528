import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { newToken } from './support/herald.js';
import { modernOverHttp } from './support/mcp-v2.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';

/**
 * OAuth across replicas of `herald mcp --http`: the audience a token must name is one URL for the
 * service (HERALD_MCP_RESOURCE). Unset, it would be each process's own address: off loopback that
 * is refused at start-up, naming the variable; on loopback it is said as a warning. Set, every
 * replica accepts a token minted for that URL, and publishes the same resource metadata.
 */
describe('herald mcp --http: OAuth audience across replicas (HERALD_MCP_RESOURCE)', { timeout: 60_000 }, () => {
  let issuer: LocalIssuer;
  let dir: string;
  const servers: HttpServer[] = [];
  const token = newToken();
  const env = (extra: Record<string, string>): ReturnType<typeof loadConfig> =>
    loadConfig({ HERALD_URL: 'http://127.0.0.1:9', MCP_BRIDGE_TOKEN: newToken(), HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_OAUTH_ISSUER: issuer.url, ...extra });

  beforeAll(async () => {
    issuer = await localIssuer();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-oauth-replicas-'));
  });
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await issuer?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('off loopback without HERALD_MCP_RESOURCE, it refuses to start, naming the variable', async () => {
    await expect(startHttp(env({ HOST: '0.0.0.0' }), newToken(), token, createLogger('silent'))).rejects.toThrow(/HERALD_MCP_RESOURCE must be set with HERALD_MCP_OAUTH_ISSUER when HOST is not loopback \(HOST=0\.0\.0\.0\)/);
  });

  it('on loopback without it, it says so at start-up', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString('utf8').split('\n').filter((x) => x !== '')) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const { url, server } = await startHttp(env({}), newToken(), token, createLogger('info', stream));
    servers.push(server);
    const warning = lines.find((l) => l['level'] === 40);
    expect(warning?.['msg']).toMatch(/HERALD_MCP_RESOURCE is not set/);
    expect(warning?.['resource']).toBe(url);
  });

  it('with it, every replica accepts a token for that URL, refuses one for a replica’s own address, and publishes the same metadata', async () => {
    const resource = 'https://mcp.example.com/mcp';
    const replicas: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { url, server } = await startHttp(env({ HERALD_MCP_RESOURCE: resource, HERALD_MCP_STATE: path.join(dir, `r${i}.json`) }), newToken(), token, createLogger('silent'));
      servers.push(server);
      replicas.push(url);
    }
    const good = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: resource });
    const own = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: replicas[0] });
    for (const url of replicas) {
      const client = await modernOverHttp('replica', url, good);
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
      await client.close();
      const refused = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${own}`, 'content-type': 'application/json' }, body: '{}' });
      expect(refused.status).toBe(401);
      const metadata = (await (await fetch(new URL('/.well-known/oauth-protected-resource/mcp', url))).json()) as { resource: string };
      expect(metadata.resource).toBe(resource);
    }
  });
});
