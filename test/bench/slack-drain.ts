import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import type { DiscordSandbox } from '../../src/platforms/discord/sandbox/sandbox.js';
import { SlackSandbox } from '../../src/platforms/slack/sandbox/sandbox.js';
import { webClient } from '../support/slack-sandbox.js';
import { deliveryRequest } from './rows.js';

/**
 * `npm run bench -- --only=slack`: N posts drained over 20 Slack channels of the Slack sandbox, with
 * Slack's own per-channel limit (1 message per second per channel, the sandbox's default), by three
 * Herald processes on one PostgreSQL database. The floor is what the limit allows: N / (channels ×
 * the sandbox's posts per second per channel). Reported: the time, the floor, their ratio (target
 * ≤ 1.10), the 429s the sandbox answered (target 0: Herald's shared budget keeps under the limit)
 * and duplicates (messages carrying the same delivery key; 0).
 */

export const SLACK_CHANNELS = 20;
/** The sandbox's limit, as Slack's: chat.postMessage per channel per second. */
const POSTS_PER_SECOND_PER_CHANNEL = 1;
const DESTINATIONS = ['alerts', 'deals', 'digest', 'ops'] as const;

/** What run.ts lends this scenario: its Herald processes on its throwaway PostgreSQL database. */
export interface SlackDrainHarness {
  discord: DiscordSandbox;
  /** Empty the deliveries table. */
  truncate(): Promise<void>;
  /** Start `processes` Herald processes (one serve, the rest dispatch) with this extra environment. */
  start(env: Record<string, string>, processes: number): Promise<SlackDrainHerald>;
  connections: number;
}

export interface SlackDrainHerald {
  url: string;
  bridge: Record<string, string>;
  admin: Record<string, string>;
  stop(): Promise<void>;
}

export async function slackDrain(harness: SlackDrainHarness, posts: number, processes = 3): Promise<Record<string, number>> {
  const slack = new SlackSandbox({ postsPerSecondPerChannel: POSTS_PER_SECOND_PER_CHANNEL });
  await slack.start(0, '127.0.0.1');
  try {
    await harness.truncate();
    // The channels, created by the bot (so it is a member of each); conversations.create is Tier 2, 20 a minute.
    const client = webClient(slack);
    const channels: string[] = [];
    for (let i = 0; i < SLACK_CHANNELS; i++) {
      const created = (await client.conversations.create({ name: `bench-${i}` })) as { channel?: { id?: string } };
      channels.push(created.channel?.id ?? '');
    }
    const h = await harness.start({ SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl }, processes);
    try {
      // 5 guilds × 4 destinations = 20 destinations, one per Slack channel.
      const targets: { guildId: string; destination: string }[] = [];
      for (const [i, channel] of channels.entries()) {
        const guildId = `9${String(Math.floor(i / DESTINATIONS.length)).padStart(17, '0')}`;
        if (i % DESTINATIONS.length === 0) harness.discord.addGuild(guildId, `slack bench ${i / DESTINATIONS.length}`);
        const destination = DESTINATIONS[i % DESTINATIONS.length] ?? 'alerts';
        const res = await fetch(`${h.url}/admin/destinations/${guildId}/${destination}`, {
          method: 'PUT',
          headers: { 'content-type': 'application/json', ...h.admin },
          body: JSON.stringify({ transport: 'slack', channel }),
        });
        if (res.status !== 200) throw new Error(`mapping ${guildId}/${destination} to Slack ${channel}: ${res.status} ${await res.text()}`);
        targets.push({ guildId, destination });
      }
      const keys = new Set<string>();
      const requests = Array.from({ length: posts }, (_, i) => {
        const t = targets[i % targets.length];
        const r = deliveryRequest(t?.guildId ?? '', t?.destination ?? '');
        keys.add(deliveryNonce(String(r['request_id'])));
        return r;
      });
      const limited = slack.ratelimited;
      const t0 = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: harness.connections }, async () => {
          while (next < requests.length) {
            const r = requests[next++];
            const res = await fetch(`${h.url}/mcp/deliveries`, { method: 'POST', headers: { 'content-type': 'application/json', ...h.bridge }, body: JSON.stringify(r) });
            await res.text();
            if (res.status !== 202) throw new Error(`slack drain POST: ${res.status}`);
          }
        }),
      );
      const accepted = (performance.now() - t0) / 1000;
      const floor = posts / (channels.length * POSTS_PER_SECOND_PER_CHANNEL);
      const marked = () => channels.flatMap((c) => slack.messages(c)).flatMap((m) => (m.metadata?.event_type === 'herald_delivery' && keys.has(String(m.metadata.event_payload['id'])) ? [String(m.metadata.event_payload['id'])] : []));
      const deadline = Date.now() + floor * 3 * 1000 + 60_000;
      while (new Set(marked()).size < posts) {
        if (Date.now() > deadline) throw new Error(`timed out: ${new Set(marked()).size} of ${posts} posts in the Slack sandbox`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const seconds = (performance.now() - t0) / 1000;
      const all = marked();
      const duplicates = all.length - new Set(all).size;
      const rateLimited = slack.ratelimited - limited;
      const ratio = Math.round((seconds / floor) * 1000) / 1000;
      console.log(
        `  slack drain ${posts} over ${channels.length} channels (${POSTS_PER_SECOND_PER_CHANNEL}/s each) with ${processes} Herald processes: ${seconds.toFixed(1)} s (floor ${floor} s, ratio ${ratio}, target ≤ 1.10), 429s ${rateLimited}, duplicates ${duplicates}`,
      );
      return {
        [`slack drain ${posts} s`]: Math.round(seconds * 10) / 10,
        [`slack drain floor s`]: floor,
        [`slack drain ÷ floor`]: ratio,
        [`slack drain accepted in s`]: Math.round(accepted * 10) / 10,
        [`slack drain 429s`]: rateLimited,
        [`slack drain duplicates`]: duplicates,
      };
    } finally {
      await h.stop();
    }
  } finally {
    await slack.close();
  }
}
