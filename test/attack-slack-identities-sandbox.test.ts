import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SlackSandbox, SLACK_SANDBOX_IDS as ONE, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { apiCall } from './support/slack-sandbox.js';

// From the attacking helper: each workspace's conversation ids are its own, as Slack's are unique
// (state.ts idInfix). They were told apart by one digit, String(n % 10): the tenth workspace made
// the default one's ids (D0000000001 in both), and sandbox.messages(id) answered the wrong one.


describe('attack: conversation ids across ten sandbox workspaces', () => {
  const sandbox = new SlackSandbox({ postsPerSecondPerChannel: 100 });
  let tenth: OtherWorkspace;
  beforeAll(async () => {
    for (let i = 2; i <= 10; i++) tenth = sandbox.addWorkspace(`w${i}`);
    await sandbox.start(0, '127.0.0.1');
  });
  afterAll(() => sandbox.close());

  it('gives every workspace conversation ids no other workspace gives', async () => {
    const one = await apiCall(sandbox, sandbox.botToken, 'chat.postMessage', { channel: ONE.users.bob, text: 'dm in the default workspace' });
    const ten = await apiCall(sandbox, tenth.botToken, 'chat.postMessage', { channel: tenth.ids.users.bob, text: 'dm in the tenth workspace' });
    expect(one).toMatchObject({ ok: true });
    expect(ten).toMatchObject({ ok: true });
    expect(ten['channel']).not.toBe(one['channel']);
    expect(sandbox.messages(String(ten['channel'])).map((m) => m.text)).toEqual(['dm in the tenth workspace']);
  });
});
