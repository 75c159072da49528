import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { heraldEnv, IDS, newRequestId, newToken, post, startTestHerald, type TestHerald } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';
import { waitFor } from './support/wait.js';

/**
 * A chat line gets a post's guarantee on Discord: a re-drive past the nonce window looks for what
 * the first attempt created (the gateway's nonce reports, else the channel's history) instead of
 * trusting a nonce Discord has forgotten. Real processes, killed with SIGKILL.
 */
describe('a chat line whose create succeeded but whose answer was lost', () => {
  let forgetful: DiscordSandbox;
  let db: TestDatabase;
  const procs: HeraldProcess[] = [];
  const bridgeToken = newToken();
  const adminToken = newToken();

  beforeAll(async () => {
    // This Discord forgets nonces at once: only proof can stop a second message.
    forgetful = await new DiscordSandbox({ nonceWindowMs: 0 }).start();
  });
  afterAll(() => forgetful.close());
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') for (const p of procs) console.error(`--- herald output ---\n${p.output()}`);
    for (const p of procs.splice(0)) {
      p.kill('SIGKILL');
      await p.exited;
    }
    forgetful.clearFaults();
    await db?.drop();
  });

  const start = async (): Promise<HeraldProcess> => {
    const env = heraldEnv(
      { sandbox: forgetful, db, bridgeToken, adminToken },
      { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500', HERALD_NONCE_WINDOW_MS: '0', HERALD_GATEWAY: 'off', HERALD_DISCORD_CHAT_GUILD: IDS.guild },
    );
    const p = await startHeraldProcess(['serve'], env);
    procs.push(p);
    return p;
  };

  it('re-driven after the nonce window by a restarted Herald: exactly one message, delivered', async () => {
    db = await testDatabase();
    const text = `chat-crash ${newRequestId().slice(0, 12)}`;
    const shown = `**ada**: ${text}`;
    const first = await start();
    forgetful.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000 });
    const sent = await client(first.url ?? '', bridgeToken).post('/mcp/chat/messages', { channel: '#alerts', text, sender: 'ada' });
    expect(sent.status).toBe(202);
    const id = (sent.json as { id: string }).id;
    await waitFor(() => forgetful.allMessages().filter((m) => m.content === shown).length === 1, 'Discord to create the line');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    forgetful.clearFaults();

    const second = await start();
    const api = client(second.url ?? '', bridgeToken);
    const done = await waitFor(async () => {
      const r = (await api.get(`/mcp/chat/messages/${id}`)).json as { state: string };
      return r.state !== 'pending' ? r : undefined;
    }, 'the re-driven chat send to settle', 30_000);
    const lines = forgetful.allMessages().filter((m) => m.content === shown);
    expect(lines).toHaveLength(1);
    expect(done).toMatchObject({ state: 'delivered', message_ids: [lines[0]?.id] });
  });
});

/**
 * The nonce window is held when a request leaves, not when its attempt starts: a resend queued
 * behind a saturated rate budget that would leave past the window stays home, and the delivery is
 * settled by proof instead.
 */
describe('posts queued behind a saturated rate budget, with a tight nonce window', () => {
  let h: TestHerald;
  const POSTS = 8;

  beforeAll(async () => {
    // Discord remembers a nonce for 1.5 s; Herald trusts it for 1 s. Two requests a second make a
    // resend wait seconds behind the other posts' creates.
    h = await startTestHerald({
      sandbox: { nonceWindowMs: 1_500 },
      env: { HERALD_NONCE_WINDOW_MS: '1000', HERALD_DISCORD_PER_SECOND: '2', HERALD_RETRY_BASE_MS: '50', HERALD_DISPATCH_CONCURRENCY: String(POSTS), HERALD_DISCORD_TIMEOUT_MS: '30000', HERALD_LEASE_MS: '60000' },
    });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h?.close());

  it('gives no duplicate: every post delivered once', async () => {
    const ids = Array.from({ length: POSTS }, () => newRequestId());
    // Every first create is made but its answer lost: each post is in doubt and resent at once.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'drop_after_create', times: POSTS });
    for (const id of ids) expect((await h.bridge.post('/mcp/deliveries', post(id, `paced ${id}`))).status).toBe(202);
    for (const id of ids) await h.waitForState(id, 'delivered', 90_000);
    for (const id of ids) expect(h.sandbox.allMessages().filter((m) => m.content === `paced ${id}`)).toHaveLength(1);
  });
});
