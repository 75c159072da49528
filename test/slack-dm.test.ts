import { describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS } from '../src/platforms/slack/sandbox/sandbox.js';
import { expectValidResponse } from './support/client.js';
import { newRequestId } from './support/herald.js';
import { slackRig } from './support/rigs.js';

const SLACK = SLACK_SANDBOX_IDS;

/**
 * A person who registers with `/agent register` in Slack is reached in Slack: their pairing answers
 * their Slack id (and says so), and DMs and edits of DMs go to their Slack DM, while Discord stays
 * Herald's home platform.
 */
describe('a person registered in Slack', () => {
  const { slack, h } = slackRig();

  it('pairs through /agent in Slack and gets DMs and edits of DMs there, once each', async () => {
    const registered = await slack.slash(SLACK.users.ada, SLACK.channels.general, '/agent', 'register');
    expect(registered.response_type).toBe('ephemeral');
    expect(registered.text).toMatch(/^Registered\./);
    const paired = await slack.slash(SLACK.users.ada, SLACK.channels.general, '/agent', 'pair');
    const code = /\*\*([A-Z2-9]{27})\*\*/.exec(paired.text ?? '')?.[1];
    expect(code, paired.text).toBeDefined();

    const redeemed = await h.bridge.post('/mcp/pair/redeem', { code });
    expect(redeemed.status, redeemed.text).toBe(200);
    await expectValidResponse('POST', '/mcp/pair/redeem', 200, redeemed.json);
    expect(redeemed.json).toMatchObject({ discord_user_id: SLACK.users.ada, platform: 'slack' });

    const dm = newRequestId();
    const sent = await h.bridge.post('/mcp/deliveries', { request_id: dm, kind: 'dm', target: { user_id: SLACK.users.ada }, body: { content: 'hello ada, in Slack' } });
    expect(sent.status, sent.text).toBe(202);
    const delivered = await h.waitForState(dm, 'delivered');
    await expectValidResponse('GET', '/mcp/deliveries/{request_id}', 200, delivered);
    const channel = /\/archives\/(D[A-Z0-9]+)\/p[0-9]+$/.exec(String(delivered['url']))?.[1];
    expect(channel, String(delivered['url'])).toBeDefined();
    const inDm = () => slack.messages(channel ?? '').filter((m) => m.user === SLACK.bot.user);
    expect(inDm().map((m) => m.text)).toEqual([expect.stringContaining('hello ada, in Slack')]);

    const edit = newRequestId();
    const edited = await h.bridge.post('/mcp/deliveries', { request_id: edit, kind: 'edit', target: { message_ref: dm, seq: 1 }, body: { content: 'hello ada, edited' } });
    expect(edited.status, edited.text).toBe(202);
    expect(await h.waitForState(edit, 'delivered')).toMatchObject({ applied: true });
    expect(inDm().map((m) => m.text)).toEqual([expect.stringContaining('hello ada, edited')]);
  });

  it('a Slack user who never registered is refused as unreachable, and nothing is sent', async () => {
    const dm = newRequestId();
    const sent = await h.bridge.post('/mcp/deliveries', { request_id: dm, kind: 'dm', target: { user_id: SLACK.users.bob }, body: { content: 'not for bob' } });
    expect(sent.status, sent.text).toBe(202);
    expect(await h.waitForState(dm, 'failed')).toMatchObject({ code: 'RECIPIENT_UNREACHABLE' });
  });
});
