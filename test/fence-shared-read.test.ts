import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fenceUntil, withFence } from '../src/infra/faults/fence.js';
import { SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { SlackPlatform } from '../src/platforms/slack/slack-platform.js';

/**
 * A job's fence stays with that job's requests: a read every caller shares (the bot's identity,
 * asked once and kept) that one job happened to start is not stopped by that job's fence, so a
 * caller outside any job, or another job, never gets a LeaseLostError for a lease it does not hold.
 */
describe('a shared, cached read started inside a job', () => {
  let slack: SlackSandbox;
  beforeAll(async () => {
    slack = new SlackSandbox();
    await slack.start(0, '127.0.0.1');
  });
  afterAll(async () => {
    await slack?.close();
  });

  it('answers a caller outside the job although the job that started it is past its lease (old code: LeaseLostError)', async () => {
    const transport = new SlackPlatform({ token: slack.botToken, apiUrl: slack.apiUrl, timeoutMs: 3_000 });
    // A job whose lease has ended (its fence no longer holds) asks first; a command's answer (no job) asks meanwhile.
    const stale = withFence(fenceUntil(0, "the job's lease"), () => transport.identity());
    const outside = transport.identity();
    await stale.catch(() => undefined);
    await expect(outside).resolves.toMatchObject({ userId: expect.any(String) as string });
  });
});
