import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

/**
 * GET /gateway/bot names the host the client asked (the chaos campaign's partitions, the singleton
 * partition tests), so a client behind a proxy reaches the gateway through that proxy too; asked
 * directly, the sandbox's own address.
 */
describe('Discord sandbox: the gateway through the host asked', () => {
  let through: DiscordSandbox;
  let plain: DiscordSandbox;
  let proxy: TcpProxy;
  beforeAll(async () => {
    through = await new DiscordSandbox({ mediaMessages: 0 }).start();
    plain = await new DiscordSandbox({ mediaMessages: 0 }).start();
    proxy = await startTcpProxy({ upstreamPort: Number(new URL(through.url).port) });
  });
  afterAll(async () => {
    await proxy.close();
    await through.close();
    await plain.close();
  });

  const gatewayUrl = async (base: string, token: string): Promise<string> => {
    const res = await fetch(`${base}/api/v10/gateway/bot`, { headers: { authorization: `Bot ${token}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { url: string }).url;
  };

  it('names the proxy asked through', async () => {
    expect(await gatewayUrl(`http://127.0.0.1:${proxy.port}`, through.botToken)).toBe(`ws://127.0.0.1:${proxy.port}/gateway`);
  });

  it('names its own address when asked directly', async () => {
    expect(await gatewayUrl(plain.url, plain.botToken)).toBe(`${plain.url.replace(/^http/, 'ws')}/gateway`);
  });
});
