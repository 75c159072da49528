import { describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS } from '../src/platforms/slack/sandbox/sandbox.js';
import { IDS, newRequestId } from './support/herald.js';
import { slackRig } from './support/rigs.js';

const SLACK = SLACK_SANDBOX_IDS;
const DESTINATION = 'ops';

/** Issue 25 on Slack: reactions (reactions.add/remove) and deletes (chat.delete) through @slack/web-api, each once. */
describe('reactions and deletes on Slack', () => {
  const { slack, h } = slackRig({ env: { HERALD_MAX_ATTEMPTS: '4' }, destination: DESTINATION });

  const posted = async (): Promise<{ ref: string; ts: string }> => {
    const ref = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: ref, kind: 'post', target: { guild_id: IDS.guild, destination: DESTINATION }, body: { content: `slack ${ref}` } });
    await h.waitForState(ref, 'delivered');
    const m = slack.messages(SLACK.channels.general).find((x) => x.text.includes(ref.slice(0, 16)));
    if (m === undefined) throw new Error('post not in the Slack sandbox');
    return { ref, ts: m.ts };
  };
  const message = (ts: string) => slack.messages(SLACK.channels.general).find((m) => m.ts === ts);

  it('adds a reaction once (already_reacted is success), by message_ref and by destination and ts, then removes it', async () => {
    const { ref, ts } = await posted();
    const a = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: a, kind: 'reaction', target: { message_ref: ref }, body: { emoji: '👍' } });
    await h.waitForState(a, 'delivered');
    const b = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: b, kind: 'reaction', target: { guild_id: IDS.guild, destination: DESTINATION, message_id: ts }, body: { emoji: '+1' } });
    await h.waitForState(b, 'delivered');
    expect(message(ts)?.reactions).toEqual([{ name: '+1', users: [SLACK.bot.user], count: 1 }]);
    const c = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: c, kind: 'reaction', target: { message_ref: ref }, body: { emoji: '👍', remove: true } });
    await h.waitForState(c, 'delivered');
    expect(message(ts)?.reactions ?? []).toEqual([]);
    // no_reaction (removing it again) is success too.
    const d = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: d, kind: 'reaction', target: { message_ref: ref }, body: { emoji: '👍', remove: true } });
    await h.waitForState(d, 'delivered');
  });

  it('a reaction whose answer was lost is one reaction', async () => {
    const { ref, ts } = await posted();
    slack.faults.dropAnswerAfterAct('reactions.add', 1);
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'reaction', target: { message_ref: ref }, body: { emoji: 'eyes' } });
    await h.waitForState(id, 'delivered');
    expect(message(ts)?.reactions).toEqual([{ name: 'eyes', users: [SLACK.bot.user], count: 1 }]);
    expect(slack.calls('reactions.add')).toBeGreaterThanOrEqual(2);
  });

  it('deletes once: a delete whose answer was lost finds message_not_found and is delivered', async () => {
    const { ref, ts } = await posted();
    slack.faults.dropAnswerAfterAct('chat.delete', 1);
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'delete', target: { message_ref: ref } });
    const state = await h.waitForState(id, 'delivered');
    expect(state['message_ref']).toBe(ref);
    expect(message(ts)).toBeUndefined();
    expect(slack.deleted().filter((d) => d.ts === ts)).toHaveLength(1);
    expect(slack.calls('chat.delete')).toBeGreaterThanOrEqual(2);
  });
});
