import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_IDS } from '../src/platforms/discord/sandbox/ids.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { waitFor } from './support/wait.js';

/**
 * The sandbox's nonce window must behave like Discord's: `enforce_nonce` makes a resend with the
 * same nonce, by the same bot in the same channel, answer the message already created, but only
 * for a few minutes. A sandbox whose nonces never expired would make every resend look safe, and
 * Herald's reconciliation by channel history (test/in-doubt.test.ts, test/send-proof.test.ts)
 * would never run in a test. Here the window is 300 ms, and the sandbox is spoken to as Discord
 * is, over its REST API.
 */
describe("the sandbox's nonce window", () => {
  const windowMs = 300;
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox({ nonceWindowMs: windowMs, mediaMessages: 0 }).start();
  });
  afterAll(() => sandbox.close());

  const channel = SANDBOX_IDS.channels.alerts;
  const create = async (body: Record<string, unknown>): Promise<string> => {
    const res = await fetch(`${sandbox.url}/api/v10/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bot ${sandbox.botToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const withContent = (content: string) => sandbox.channelMessages(channel).filter((m) => m.content === content);

  it('answers a resend inside the window with the first message, and creates a second message after it', async () => {
    const content = `window ${Date.now()}`;
    const body = { content, nonce: `n-${Date.now()}`, enforce_nonce: true };
    const first = await create(body);
    const sentAt = Date.now();
    expect(await create(body)).toBe(first);
    expect(withContent(content)).toHaveLength(1);
    // Past the window the same nonce no longer dedupes: a resend is a second message.
    await waitFor(() => Date.now() - sentAt > windowMs + 50, 'the nonce window to pass', 5_000);
    const second = await create(body);
    expect(second).not.toBe(first);
    expect(withContent(content).map((m) => m.id)).toEqual([first, second]);
  });

  it('dedupes nothing without enforce_nonce, as Discord does', async () => {
    const content = `unenforced ${Date.now()}`;
    const body = { content, nonce: `u-${Date.now()}` };
    const first = await create(body);
    expect(await create(body)).not.toBe(first);
    expect(withContent(content)).toHaveLength(2);
  });
});
