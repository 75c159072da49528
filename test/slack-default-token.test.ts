import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SlackSandbox, SLACK_SANDBOX_IDS as ONE } from '../src/platforms/slack/sandbox/sandbox.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

// "A token the platform refuses later shows on its bot's row" (docs/guides/identities.md), for the
// default Slack bot too: Slack's readiness() leaves its refused token out (so the replica stays
// ready for the other platforms), so it is an identity check under `default` (slack.plugin.ts),
// which /readyz and the status page show. Before: a revoked SLACK_BOT_TOKEN showed nowhere.
describe('status page: the default Slack bot whose token Slack revoked', { timeout: 60_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  let h: TestHerald;
  beforeAll(async () => {
    await slack.start(0, '127.0.0.1');
    h = await startTestHerald({ env: { SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl, HERALD_SLACK_TIMEOUT_MS: '3000', HERALD_MAX_ATTEMPTS: '1' } });
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/deals`, { transport: 'slack', channel: ONE.channels.general });
    expect(mapped.status, mapped.text).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
  });

  const slackRow = async (): Promise<string | undefined> => {
    const html = await (await fetch(`${h.herald.metricsUrl ?? ''}/`)).text();
    return /<tr><td>slack<\/td><td>default<\/td>.*?<\/tr>/.exec(html)?.[0];
  };

  it("shows the refused token on the slack/default row", async () => {
    expect(await slackRow()).toBeDefined();
    // Slack answers the default bot's token token_revoked from now on (the workspace uninstalled the app).
    slack.uninstall();
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'deals' }, body: { content: 'after revocation' } })).status).toBe(202);
    await waitFor(async () => {
      const r = await h.bridge.get(`/mcp/deliveries/${id}`);
      return (r.json as { state?: string }).state === 'failed' ? true : undefined;
    }, 'the post to fail');
    // Herald knows: its Slack client recorded the refusal (the ops workspace's row would say it).
    const row = await slackRow();
    expect(row).toContain('token: rejected by Slack (token_revoked)');
    const ready = (await (await fetch(`${h.url}/readyz`)).json()) as { status: string; identities?: Record<string, Record<string, string>> };
    expect(ready).toMatchObject({ status: 'ok', identities: { default: { slack_token: 'rejected by Slack (token_revoked)' } } });
  });
});
