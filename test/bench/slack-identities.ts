import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { SlackSandbox } from '../../src/platforms/slack/sandbox/sandbox.js';
import { webClient } from '../support/slack-sandbox.js';
import type { SlackDrainHarness } from './slack-drain.js';

/**
 * `npm run bench -- --only=slack-identities`: one Slack workspace's backlog against another
 * workspace's drain, in one Herald (docs/guides/identities.md). Herald speaks in two workspaces of
 * the Slack sandbox, `default` and `ops` (HERALD_SLACK_IDENTITIES), each with Slack's limits of its
 * own (1 message per second per channel; the Web API tiers per workspace). Agent A is bound to
 * `default`, agent B to `ops`.
 *
 * - alone: B's N posts over 20 channels of the ops workspace, from the first POST to the last
 *   message in the sandbox;
 * - storm: A's M posts to one channel of the default workspace first (a backlog of M seconds at
 *   Slack's pace, and the 429s Slack answers past it), then B's N posts as before, timed the same way.
 *
 * Reported: both times, their ratio (1.0: A's backlog costs B nothing), the 429s during B's drain,
 * duplicates (messages carrying the same delivery's key; 0) and B's messages sent by another bot
 * than the ops workspace's (0).
 */

const CHANNELS = 20;
const DESTINATIONS = ['alerts', 'deals', 'digest', 'ops'] as const;
/** A's guild: its `alerts` is the default workspace's channel the storm goes to. */
const A_GUILD = '800000000000000000';

export async function slackIdentitiesIsolation(harness: SlackDrainHarness, n: number, storm: number, processes = 2): Promise<Record<string, number>> {
  const slack = new SlackSandbox({ postsPerSecondPerChannel: 1 });
  await slack.start(0, '127.0.0.1');
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-bench-slack-identities-'));
  try {
    const ops = slack.addWorkspace('ops');
    const policy = path.join(dir, 'agents.yaml');
    await writeFile(policy, 'clients:\n  agent-a: { identity: default }\n  agent-b: { identity: ops }\n');
    const env = { SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl, HERALD_SLACK_IDENTITIES: 'ops=env:BENCH_OPS_SLACK_TOKEN', BENCH_OPS_SLACK_TOKEN: ops.botToken, HERALD_POLICY: policy };
    // A's channel in the default workspace; B's 20 in the ops workspace, each created by its workspace's bot.
    const stormChannel = await createChannel(webClient(slack), 'storm');
    const opsClient = webClient(slack, ops.botToken);
    const channels: { guildId: string; destination: string; id: string }[] = [];
    for (let i = 0; i < CHANNELS; i++) {
      const guildId = `7${String(Math.floor(i / DESTINATIONS.length)).padStart(17, '0')}`;
      if (i % DESTINATIONS.length === 0) harness.discord.addGuild(guildId, `slack identities ${i / DESTINATIONS.length}`);
      channels.push({ guildId, destination: DESTINATIONS[i % DESTINATIONS.length] ?? 'alerts', id: await createChannel(opsClient, `ops-${i}`) });
    }
    harness.discord.addGuild(A_GUILD, 'slack identities storm');
    const mappings = [...channels, { guildId: A_GUILD, destination: 'alerts', id: stormChannel }];
    const run = (m: number) => round(harness, slack, env, processes, mappings, stormChannel, ops.ids.bot.user, n, m);
    const alone = await run(0);
    const stormed = await run(storm);
    const row = {
      [`slack identities: B's ${n} alone s`]: r(alone.seconds),
      [`slack identities: B's ${n} beside A's backlog s`]: r(stormed.seconds),
      'slack identities: backlog ÷ alone': r(stormed.seconds / alone.seconds, 100),
      "slack identities: A's messages during B's drain": stormed.aDuring,
      "slack identities: 429s during B's drain": stormed.limited,
      'slack identities: duplicates': alone.duplicates + stormed.duplicates,
      "slack identities: B's messages from another bot": alone.otherBot + stormed.otherBot,
    };
    console.log(
      `  slack identities: B's ${n} posts alone ${alone.seconds.toFixed(2)} s, beside A's ${storm}-post backlog ${stormed.seconds.toFixed(2)} s (×${(stormed.seconds / alone.seconds).toFixed(2)}); A's messages meanwhile ${stormed.aDuring}; 429s ${stormed.limited}; duplicates ${alone.duplicates + stormed.duplicates}; from another bot ${alone.otherBot + stormed.otherBot}`,
    );
    return row;
  } finally {
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function createChannel(client: ReturnType<typeof webClient>, name: string): Promise<string> {
  const created = (await client.conversations.create({ name })) as { channel?: { id?: string } };
  if (created.channel?.id === undefined) throw new Error(`slack identities: conversations.create ${name} answered no channel`);
  return created.channel.id;
}

async function round(
  harness: SlackDrainHarness,
  slack: SlackSandbox,
  env: Record<string, string>,
  processes: number,
  mappings: { guildId: string; destination: string; id: string }[],
  stormChannel: string,
  opsBot: string,
  n: number,
  storm: number,
): Promise<{ seconds: number; duplicates: number; limited: number; aDuring: number; otherBot: number }> {
  await harness.truncate();
  const h = await harness.start(env, processes);
  try {
    for (const c of mappings) {
      const res = await fetch(`${h.url}/admin/destinations/${c.guildId}/${c.destination}`, { method: 'PUT', headers: { 'content-type': 'application/json', ...h.admin }, body: JSON.stringify({ transport: 'slack', channel: c.id }) });
      if (res.status !== 200) throw new Error(`slack identities: mapping ${c.guildId}/${c.destination}: ${res.status} ${await res.text()}`);
    }
    const post = async (client: string, guildId: string, destination: string, content: string): Promise<string> => {
      const id = randomBytes(32).toString('hex');
      const res = await fetch(`${h.url}/mcp/deliveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-herald-policy-client': client, ...h.bridge },
        body: JSON.stringify({ request_id: id, kind: 'post', target: { guild_id: guildId, destination }, body: { content } }),
      });
      if (res.status !== 202) throw new Error(`slack identities: POST as ${client}: ${res.status} ${await res.text()}`);
      return deliveryNonce(id);
    };
    const keyOf = (m: { metadata?: { event_type: string; event_payload: Record<string, unknown> } }): string | undefined => (m.metadata?.event_type === 'herald_delivery' ? String(m.metadata.event_payload['id']) : undefined);
    const tag = randomBytes(4).toString('hex');
    // A's backlog: every post to one channel, accepted before B's first.
    for (let i = 0; i < storm; i += 32) await Promise.all(Array.from({ length: Math.min(32, storm - i) }, (_, k) => post('agent-a', A_GUILD, 'alerts', `A ${tag} ${i + k}`)));
    if (storm > 0) await waitFor(() => slack.messages(stormChannel).length > 0, 30_000, "A's first message");
    const aBefore = slack.messages(stormChannel).length;
    const limitedBefore = slack.ratelimited;
    const t0 = performance.now();
    const keys = new Set<string>();
    const bChannels = mappings.filter((c) => c.id !== stormChannel);
    for (let i = 0; i < n; i += 32) {
      const part = await Promise.all(
        Array.from({ length: Math.min(32, n - i) }, (_, k) => {
          const c = bChannels[(i + k) % bChannels.length] ?? bChannels[0];
          return post('agent-b', c?.guildId ?? '', c?.destination ?? '', `B ${tag} ${i + k}`);
        }),
      );
      for (const key of part) keys.add(key);
    }
    const mine = () => bChannels.flatMap((c) => slack.messages(c.id)).filter((m) => keys.has(keyOf(m) ?? ''));
    await waitFor(() => new Set(mine().map(keyOf)).size >= n, 180_000, `B's ${n} messages`);
    const seconds = (performance.now() - t0) / 1000;
    const seen = mine();
    return {
      seconds,
      duplicates: seen.length - new Set(seen.map(keyOf)).size,
      limited: slack.ratelimited - limitedBefore,
      aDuring: slack.messages(stormChannel).length - aBefore,
      otherBot: seen.filter((m) => m.user !== opsBot).length,
    };
  } finally {
    await h.stop();
  }
}

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`slack identities: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const r = (x: number, by = 1000): number => Math.round(x * by) / by;
