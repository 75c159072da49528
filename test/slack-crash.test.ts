import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { createLogger } from '../src/infra/log.js';
import { SlackSandbox, SLACK_SANDBOX_IDS } from '../src/platforms/slack/sandbox/sandbox.js';
import { client } from './support/client.js';
import { IDS, newRequestId } from './support/herald.js';
import { crashRig } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/**
 * A proxy in front of the Slack sandbox that passes every call on, but while `holding` keeps
 * chat.postMessage's answer: Slack has created the message, Herald never hears so.
 */
class HoldingProxy {
  holding = false;
  /** Answers kept back (their requests stay open until the proxy closes). */
  readonly held: ServerResponse[] = [];
  private readonly server: Server;
  url = '';

  constructor(private readonly target: string) {
    this.server = createServer((req, res) => void this.pass(req, res));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/api/`;
  }

  private async pass(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const method = (req.url ?? '').replace(/^\/api\//, '');
    const headers: Record<string, string> = {};
    for (const name of ['content-type', 'authorization']) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    try {
      const answer = await fetch(`${this.target}${method}`, { method: 'POST', headers, body: Buffer.concat(chunks) });
      const body = Buffer.from(await answer.arrayBuffer());
      if (this.holding && method.startsWith('chat.postMessage')) {
        this.held.push(res);
        return;
      }
      res.writeHead(answer.status, Object.fromEntries([...answer.headers.entries()].filter(([k]) => k === 'content-type' || k === 'retry-after')));
      res.end(body);
    } catch {
      res.destroy();
    }
  }

  async close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Crash safety on Slack with real processes: SIGKILL a Herald after Slack created the message and
 * before Herald recorded it, then restart: the message is found by its key in the channel's
 * history (Slack has no idempotency key), never posted twice.
 */
describe('a Herald killed between Slack creating the message and the commit', () => {
  const rig = crashRig();
  const { procs, bridgeToken, adminToken } = rig;
  let slack: SlackSandbox;
  let proxy: HoldingProxy;

  beforeAll(async () => {
    slack = new SlackSandbox();
    await slack.start(0, '127.0.0.1');
    proxy = new HoldingProxy(slack.apiUrl);
    await proxy.start();
  });
  afterAll(async () => {
    await proxy?.close();
    await slack?.close();
  });
  afterEach(() => {
    proxy.holding = false;
  });

  /** A Herald on the current test's database, its Slack calls through the proxy. */
  const slackEnv = (): Record<string, string> =>
    rig.env({
      SLACK_BOT_TOKEN: slack.botToken,
      SLACK_API_URL: proxy.url,
      HERALD_SLACK_TIMEOUT_MS: '1000',
      HERALD_DISCORD_TIMEOUT_MS: '1000',
      HERALD_LEASE_MS: '2500',
      HERALD_NONCE_WINDOW_MS: '0',
      HERALD_GATEWAY: 'off',
    });
  const postOf = (id: string) => ({ request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'ops' }, body: { content: `crash ${id.slice(0, 8)}` } });
  const marked = (id: string) => slack.messages(SLACK_SANDBOX_IDS.channels.general).filter((m) => m.metadata?.event_payload['id'] === deliveryNonce(id));

  /** Post through a fresh `herald serve`, and SIGKILL it once Slack created the message, its answer held back. */
  async function postAndKillAfterSlackCreated(env: Record<string, string>, id: string): Promise<void> {
    const first = await procs.start(['serve'], env);
    const map = await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/ops`, { transport: 'slack', channel: SLACK_SANDBOX_IDS.channels.general });
    expect(map.status, map.text).toBe(200);
    proxy.holding = true;
    const accepted = await client(first.url ?? '', bridgeToken).post('/mcp/deliveries', postOf(id));
    expect(accepted.status).toBe(202);
    await waitFor(() => marked(id).length === 1 && proxy.held.length > 0, 'Slack to create the message, its answer held');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    proxy.holding = false;
  }

  it('the restarted Herald finds the message by its key: delivered once, with its permalink', async () => {
    await rig.database();
    const env = slackEnv();
    const id = newRequestId();
    await postAndKillAfterSlackCreated(env, id);
    const second = await procs.start(['serve'], env);
    const state = await waitForDelivery(client(second.url ?? '', bridgeToken), id, 'delivered', 'the reconciled delivery', 60_000);
    const sent = marked(id);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(`${slack.url}/archives/${SLACK_SANDBOX_IDS.channels.general}/p${sent[0]?.ts.replace('.', '')}`);
    expect(slack.calls('conversations.history')).toBeGreaterThan(0);
  }, 150_000);

  it('a connector re-POSTing the orphan keeps it in doubt: still one message, found by its key', async () => {
    await rig.database();
    const env = slackEnv();
    const id = newRequestId();
    await postAndKillAfterSlackCreated(env, id);
    // An API-only Herald (no dispatcher) shows the orphan unknown once its lease ran out; the connector re-POSTs it.
    const apiOnly = await startHerald({ config: loadConfig({ ...env, LOG_LEVEL: 'silent' }), log: createLogger('silent'), roles: { http: true, dispatcher: false } });
    try {
      const api = client(apiOnly.url ?? '', bridgeToken);
      await waitForDelivery(api, id, 'unknown', 'the lease to expire', 15_000);
      expect((await api.post('/mcp/deliveries', postOf(id))).json).toMatchObject({ existing: true, state: { state: 'pending' } });
    } finally {
      await apiOnly.close();
    }
    const second = await procs.start(['serve'], env);
    await waitForDelivery(client(second.url ?? '', bridgeToken), id, 'delivered', 'the reconciled delivery', 60_000);
    expect(marked(id)).toHaveLength(1);
  }, 150_000);
});
