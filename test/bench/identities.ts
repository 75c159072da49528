import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { DiscordSandbox, SANDBOX_MEMBER_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';

/**
 * `npm run bench -- --only=identities`: one bot's 429 storm against another bot's drain, in one
 * Herald (docs/guides/identities.md). Herald runs two Discord bots, `default` and `ops`, on the
 * sandbox with Discord's limits (each bot its own: 50 requests/s, 5 creates per 5 s per channel);
 * agent B is bound to `ops`, agent A to `default`.
 *
 * - alone: B's N posts over 20 channels, from the first POST to the last message in the sandbox;
 * - storm: A's M posts to one channel first (its bucket allows one a second: a storm of 429s and a
 *   backlog that lasts minutes), then B's N posts as before, timed the same way.
 *
 * Reported: both times, their ratio (1.0: A's storm costs B nothing), the 429s during B's drain,
 * and duplicates (messages carrying the same delivery's nonce; 0).
 */

export interface IdentitiesHarness {
  /** Empty the deliveries table. */
  truncate(): Promise<void>;
  /** Start Herald (one serve and `processes - 1` dispatch processes) on this sandbox with these settings. */
  start(sandbox: DiscordSandbox, env: Record<string, string>): Promise<{ url: string; bridge: Record<string, string>; admin: Record<string, string>; stop(): Promise<void> }>;
}

const CHANNELS = 20;
const DESTINATIONS = ['alerts', 'deals', 'digest', 'ops'] as const;

export async function identitiesIsolation(harness: IdentitiesHarness, n: number, storm: number): Promise<Record<string, number>> {
  const sandbox = await new DiscordSandbox({ routeLimit: { limit: 5, windowMs: 5_000 }, globalLimit: { limit: 50, windowMs: 1_000 } }).start();
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-bench-identities-'));
  try {
    const ops = sandbox.addBot('herald-ops');
    const policy = path.join(dir, 'agents.yaml');
    await writeFile(policy, 'clients:\n  agent-a: { identity: default }\n  agent-b: { identity: ops }\n');
    const env = { HERALD_DISCORD_IDENTITIES: 'ops=env:BENCH_OPS_TOKEN', BENCH_OPS_TOKEN: ops.token, HERALD_POLICY: policy };
    // Destinations are a guild's four names: CHANNELS / 4 guilds, both bots in each.
    const channels = Array.from({ length: CHANNELS }, (_, i) => {
      const guildId = `5${String(Math.floor(i / 4)).padStart(17, '0')}`;
      if (i % 4 === 0) {
        sandbox.addGuild(guildId, `isolation ${i / 4}`);
        for (const bot of [sandbox.bot.id, ops.user.id]) sandbox.people.setMember(guildId, bot, [SANDBOX_MEMBER_IDS.heraldRole]);
      }
      const id = `6${String(i).padStart(17, '0')}`;
      const destination = DESTINATIONS[i % 4] ?? 'alerts';
      sandbox.addChannel({ id, type: 0, name: `${destination}-${i}`, guild_id: guildId });
      return { guildId, destination, id };
    });
    const alone = await round(harness, sandbox, env, channels, n, 0);
    const stormed = await round(harness, sandbox, env, channels, n, storm);
    const row = {
      [`identities: B's ${n} alone s`]: r(alone.seconds),
      [`identities: B's ${n} beside A's storm s`]: r(stormed.seconds),
      'identities: storm ÷ alone': r(stormed.seconds / alone.seconds, 100),
      "identities: 429s during B's drain beside the storm": stormed.stormed429,
      'identities: duplicates': alone.duplicates + stormed.duplicates,
    };
    console.log(
      `  identities: B's ${n} posts alone ${alone.seconds.toFixed(2)} s, beside A's ${storm}-post storm ${stormed.seconds.toFixed(2)} s (×${(stormed.seconds / alone.seconds).toFixed(2)}); 429s meanwhile ${stormed.stormed429}; duplicates ${alone.duplicates + stormed.duplicates}`,
    );
    return row;
  } finally {
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function round(harness: IdentitiesHarness, sandbox: DiscordSandbox, env: Record<string, string>, channels: { guildId: string; destination: string; id: string }[], n: number, storm: number): Promise<{ seconds: number; duplicates: number; stormed429: number }> {
  await harness.truncate();
  const h = await harness.start(sandbox, env);
  try {
    for (const c of channels) {
      const res = await fetch(`${h.url}/admin/destinations/${c.guildId}/${c.destination}`, { method: 'PUT', headers: { 'content-type': 'application/json', ...h.admin }, body: JSON.stringify({ channel_id: c.id }) });
      if (res.status !== 200) throw new Error(`mapping ${c.destination}: ${res.status}`);
    }
    const post = async (client: string, to: { guildId: string; destination: string } | undefined, content: string): Promise<string> => {
      const id = randomBytes(32).toString('hex');
      const res = await fetch(`${h.url}/mcp/deliveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-herald-policy-client': client, ...h.bridge },
        body: JSON.stringify({ request_id: id, kind: 'post', target: { guild_id: to?.guildId, destination: to?.destination }, body: { content } }),
      });
      if (res.status !== 202) throw new Error(`identities POST as ${client}: ${res.status} ${await res.text()}`);
      return deliveryNonce(id);
    };
    const tag = randomBytes(4).toString('hex');
    // A's storm: every post to one channel, accepted before B's first.
    for (let i = 0; i < storm; i += 32) await Promise.all(Array.from({ length: Math.min(32, storm - i) }, (_, k) => post('agent-a', channels[0], `A ${tag} ${i + k}`)));
    if (storm > 0) await waitFor(() => sandbox.allMessages().some((m) => m.content?.startsWith(`A ${tag} `) === true), 30_000, "A's first message");
    const before = sandbox.requests.length;
    const t0 = performance.now();
    const nonces = new Set<string>();
    for (let i = 0; i < n; i += 32) {
      const part = await Promise.all(Array.from({ length: Math.min(32, n - i) }, (_, k) => post('agent-b', channels[(i + k) % channels.length], `B ${tag} ${i + k}`)));
      for (const nonce of part) nonces.add(nonce);
    }
    const mine = () => sandbox.allMessages().filter((m) => typeof m.nonce === 'string' && nonces.has(m.nonce));
    await waitFor(() => new Set(mine().map((m) => m.nonce)).size >= n, 180_000, `B's ${n} messages`);
    const seconds = (performance.now() - t0) / 1000;
    const seen = mine();
    const opsId = sandbox.addBot('herald-ops').user.id;
    if (seen.some((m) => m.author.id !== opsId)) throw new Error("identities: a message of B's was sent as another bot");
    return { seconds, duplicates: seen.length - new Set(seen.map((m) => m.nonce)).size, stormed429: sandbox.requests.slice(before).filter((q) => q.status === 429).length };
  } finally {
    await h.stop();
  }
}

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`identities: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const r = (x: number, by = 1000): number => Math.round(x * by) / by;
