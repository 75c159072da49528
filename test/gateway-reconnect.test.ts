import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * The Discord gateway dropping under Herald and coming back. The sandbox's gateway has no control
 * to drop its sessions, so Herald talks to the sandbox through a proxy of this file: REST passes
 * through (the gateway's address it hands out points at the proxy), and the gateway's WebSocket
 * connections are cut, refused and let through again on the test's word, as a network would.
 */

interface GatewayProxy {
  apiUrl: string;
  /** Gateway connections let through so far. */
  accepted: number;
  /** Cut every gateway connection, and refuse new ones until up(). */
  down(): void;
  up(): void;
  close(): Promise<void>;
}

async function gatewayProxy(sandbox: DiscordSandbox): Promise<GatewayProxy> {
  const target = new URL(sandbox.url);
  const open = new Set<Socket>();
  let refusing = false;
  let url = '';
  const server: Server = createServer((req, res) => {
    const upstream = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer: IncomingMessage) => {
      if (req.url?.endsWith('/gateway/bot') !== true) {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        return;
      }
      // The gateway's address: the proxy's, so discord.js connects through it.
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { url: string };
        const text = JSON.stringify({ ...body, url: `${url.replace(/^http/, 'ws')}/gateway` });
        res.writeHead(answer.statusCode ?? 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  const proxy: GatewayProxy = {
    apiUrl: '',
    accepted: 0,
    down() {
      refusing = true;
      for (const s of open) s.destroy();
    },
    up() {
      refusing = false;
    },
    async close() {
      for (const s of open) s.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('upgrade', (req: IncomingMessage, client: Socket, head: Buffer) => {
    if (refusing) {
      client.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    proxy.accepted += 1;
    const upstream = connect(Number(target.port), target.hostname, () => {
      const lines = [`${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i] ?? ''}: ${req.rawHeaders[i + 1] ?? ''}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      client.pipe(upstream);
      // The sandbox names `ws://unused` as the address to resume at (src/platforms/discord/sandbox/gateway.ts): a
      // client could never come back after a drop. Discord names a real one: here, the proxy's.
      relayFrames(upstream, client, (text) => text.replace('"resume_gateway_url":"ws://unused"', `"resume_gateway_url":"${url.replace(/^http/, 'ws')}/gateway"`));
    });
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        open.delete(s);
        // One side gone: the other goes too, as a dropped connection does.
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.apiUrl = `${url}${new URL(sandbox.apiUrl).pathname}`;
  return proxy;
}

/**
 * Relay the gateway's side of a WebSocket connection (its 101 answer, then its frames, which a
 * server sends unmasked), each complete text frame's payload passed through `rewrite`.
 */
function relayFrames(from: Socket, to: Socket, rewrite: (text: string) => string): void {
  let pending = Buffer.alloc(0);
  let upgraded = false;
  from.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    if (!upgraded) {
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      to.write(pending.subarray(0, end + 4));
      pending = pending.subarray(end + 4);
      upgraded = true;
    }
    for (;;) {
      if (pending.length < 2) return;
      const first = pending[0] ?? 0;
      let length = (pending[1] ?? 0) & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (pending.length < 4) return;
        length = pending.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (pending.length < 10) return;
        length = Number(pending.readBigUInt64BE(2));
        offset = 10;
      }
      if (pending.length < offset + length) return;
      let payload = pending.subarray(offset, offset + length);
      pending = pending.subarray(offset + length);
      // A complete text frame (FIN set, opcode 1).
      if (first === 0x81) payload = Buffer.from(rewrite(payload.toString()));
      const n = payload.length;
      const header = n < 126 ? Buffer.from([first, n]) : n < 65_536 ? Buffer.from([first, 126, n >> 8, n & 0xff]) : Buffer.concat([Buffer.from([first, 127]), Buffer.alloc(8)]);
      if (n >= 65_536) header.writeBigUInt64BE(BigInt(n), 2);
      to.write(Buffer.concat([header, payload]));
    }
  });
}

const MANAGE_GUILD = String(1 << 5);

describe('the Discord gateway dropping and reconnecting', { timeout: 120_000 }, () => {
  let sandbox: DiscordSandbox;
  let proxy: GatewayProxy;
  let h: TestHerald;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    proxy = await gatewayProxy(sandbox);
    h = await startTestHerald({ useSandbox: sandbox, env: { DISCORD_API_URL: proxy.apiUrl } });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await proxy?.close();
    await sandbox?.close();
  });

  const readiness = async () => {
    const res = await h.bridge.get('/readyz');
    return { status: res.status, body: res.json as { status: string; checks: Record<string, string> } };
  };
  const list = async () => (await sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'destinations', subcommand: 'list', permissions: MANAGE_GUILD })).data?.content;

  it('reconnects by itself once the gateway is back, answering slash commands again; the API serves throughout', async () => {
    // Connected through the proxy: ready, and a slash command is answered.
    // Wait for the gateway itself: /readyz is 200 from the start, while the gateway lease is not
    // yet taken ('standby' counts as ready: deliveries do not need the gateway), and then 503 while
    // the session connects. The answer that says so is the one checked.
    const ready = await waitFor(async () => ((r) => (r.status === 200 && r.body.checks['gateway'] === 'ok' ? r : undefined))(await readiness()), 'the gateway to be ready');
    expect(ready.body).toMatchObject({ status: 'ok', checks: { gateway: 'ok', database: 'ok' } });
    const before = proxy.accepted;
    expect(before).toBeGreaterThanOrEqual(1);
    expect(sandbox.gatewaySessions).toBe(1);
    expect(await list()).toBe('No destinations are mapped in this server yet. Use `/destinations set`.');

    // The connection drops, and the gateway cannot be reached for a while.
    proxy.down();
    await waitFor(() => sandbox.gatewaySessions === 0, 'the gateway session to be gone');
    await expect(list()).rejects.toThrow('the bot is not connected to the gateway');
    // Deliveries do not need the gateway: Herald keeps serving its API.
    expect((await h.admin.get('/admin/destinations')).status).toBe(200);

    // Back: Herald connects again without help.
    proxy.up();
    await waitFor(() => sandbox.gatewaySessions === 1, 'one gateway session again', 60_000);
    expect(proxy.accepted).toBeGreaterThan(before);
    expect(await list()).toBe('No destinations are mapped in this server yet. Use `/destinations set`.');
    const again = await waitFor(async () => ((r) => (r.status === 200 && r.body.checks['gateway'] === 'ok' ? r : undefined))(await readiness()), 'the gateway to be ready again');
    expect(again.body).toMatchObject({ status: 'ok', checks: { gateway: 'ok' } });
  });

  // discord.js's client.isReady() stays true once the client was first ready, so /readyz also reads
  // the shards' status (gateway-client.ts): it says unavailable while the connection is gone.
  it('says gateway unavailable in /readyz while the gateway is gone', async () => {
    await waitFor(() => sandbox.gatewaySessions === 1, 'a gateway session');
    proxy.down();
    try {
      await waitFor(() => sandbox.gatewaySessions === 0, 'the gateway session to be gone');
      const down = await waitFor(async () => {
        const r = await readiness();
        return r.status === 503 ? r : undefined;
      }, '/readyz to say the gateway is unavailable', 5_000);
      expect(down.body).toEqual({ status: 'unavailable', checks: expect.objectContaining({ gateway: 'unavailable', database: 'ok' }) as Record<string, string>, singletons: { 'discord:gateway': 'held' } });
      // Only the gateway is down: every other check still holds.
      expect(Object.entries(down.body.checks).filter(([, v]) => v !== 'ok')).toEqual([['gateway', 'unavailable']]);
    } finally {
      proxy.up();
    }
  });
});
