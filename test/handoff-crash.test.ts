import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/sandbox/sandbox.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { heraldEnv, IDS, newRequestId, newToken } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';
import { waitFor } from './support/wait.js';

/**
 * A handoff is a delivery underneath: a sender SIGKILLed after Discord created the handoff message
 * and before Herald recorded it still yields exactly one handoff message, inside the nonce window
 * (Discord answers the resend with the same message) and past it (found in channel history).
 */
describe('a handoff sender killed between Discord accepting and the commit', () => {
  const PEER = '111111111111111112';
  let sandbox: DiscordSandbox;
  let db: TestDatabase | undefined;
  const procs: HeraldProcess[] = [];
  const bridgeToken = newToken();
  const adminToken = newToken();

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
  });
  afterAll(() => sandbox.close());
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') for (const p of procs) console.error(`--- herald output ---\n${p.output()}`);
    for (const p of procs.splice(0)) {
      p.kill('SIGKILL');
      await p.exited;
    }
    sandbox.clearFaults();
    await db?.drop();
    db = undefined;
  });

  async function start(discord: DiscordSandbox, extra: Record<string, string>): Promise<HeraldProcess> {
    db ??= await testDatabase();
    const p = await startHeraldProcess(
      ['serve'],
      heraldEnv({ sandbox: discord, db, bridgeToken, adminToken }, { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500', HERALD_TRUSTED_BOT_IDS: PEER, ...extra }),
    );
    procs.push(p);
    return p;
  }

  async function handOffThenCrashThenRecover(discord: DiscordSandbox, extra: Record<string, string> = {}): Promise<void> {
    const requestId = newRequestId();
    const text = `crash handoff ${requestId}`;
    const first = await start(discord, extra);
    discord.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000 });
    const accepted = await client(first.url ?? '', bridgeToken).post('/mcp/handoffs', { request_id: requestId, target_bot_id: PEER, channel_id: IDS.channels.ops, text });
    expect(accepted.status).toBe(202);
    const ours = () => discord.allMessages().filter((m) => m.content.includes(text));
    await waitFor(() => ours().length === 1, 'Discord to create the handoff message');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    discord.clearFaults();
    const second = await start(discord, extra);
    const api = client(second.url ?? '', bridgeToken);
    const state = await waitFor(async () => {
      const s = (await api.get(`/mcp/handoffs/${requestId}`)).json as Record<string, unknown>;
      return s['state'] === 'delivered' ? s : undefined;
    }, 'the re-driven handoff');
    const sent = ours();
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.ops}/${sent[0]?.id}`);
    expect(sent[0]?.allowed_mentions).toEqual({ parse: [], users: [PEER] });
  }

  it('inside the nonce window: the restarted sender re-drives it and Discord returns the same message', async () => {
    await handOffThenCrashThenRecover(sandbox);
  });

  it('past the nonce window: the restarted sender finds the message in the channel instead of sending again', async () => {
    const forgetful = new DiscordSandbox({ nonceWindowMs: 0, botToken: sandbox.botToken });
    await forgetful.start();
    try {
      await handOffThenCrashThenRecover(forgetful, { DISCORD_API_URL: forgetful.apiUrl, HERALD_NONCE_WINDOW_MS: '0', HERALD_GATEWAY: 'off' });
      expect(forgetful.requests.some((r) => r.method === 'GET' && r.path.endsWith('/messages'))).toBe(true);
    } finally {
      await forgetful.close();
    }
  });
});
