import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS } from '../src/platforms/slack/sandbox/sandbox.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { slackRig } from './support/rigs.js';
import { waitFor } from './support/wait.js';

const SLACK = SLACK_SANDBOX_IDS;

// Issue 25, point 4: replies and threads, each message once, through discord.js and @slack/web-api against the sandboxes.
describe('replies and threads', () => {
  const { slack, h } = slackRig({ env: { HERALD_MAX_ATTEMPTS: '4' }, destination: 'ops' });
  beforeAll(async () => {
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.mapDestination('deals', IDS.channels.deals);
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
  });
  beforeEach(() => h.sandbox.clearFaults());

  const posted = async (): Promise<{ ref: string; messageId: string; channelId: string }> => {
    const ref = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(ref, `msg ${ref}`));
    await h.waitForState(ref, 'delivered');
    const m = h.sandbox.allMessages().find((x) => x.content === `msg ${ref}`);
    if (m === undefined) throw new Error('posted message not in the sandbox');
    return { ref, messageId: m.id, channelId: m.channel_id };
  };
  const landed = (content: string) => h.sandbox.allMessages().filter((x) => x.content === content);

  it('a reply lands once with its message_reference, and the answers say what it replied to', async () => {
    const { messageId, channelId } = await posted();
    const id = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', reply_to: messageId }, body: { content: `reply ${id}` } });
    expect(res.status).toBe(202);
    const createdAt = (res.json as { state: { created_at: string } }).state.created_at;
    expect(res.text).toBe(`{"state":{"state":"pending","kind":"post","target":{"guild_id":"${IDS.guild}","destination":"alerts","reply_to":"${messageId}"},"body":{"content":"reply ${id}"},"created_at":"${createdAt}"},"existing":false}`);
    const s = await h.waitForState(id, 'delivered');
    expect(s['target']).toEqual({ guild_id: IDS.guild, destination: 'alerts', reply_to: messageId });
    const m = landed(`reply ${id}`);
    expect(m).toHaveLength(1);
    expect(m[0]?.message_reference).toEqual({ message_id: messageId, channel_id: channelId, guild_id: IDS.guild });
    const detail = (await h.admin.get(`/admin/deliveries/${id}`)).json as Record<string, unknown>;
    expect(detail).toMatchObject({ state: 'delivered', channel_id: channelId, message_id: m[0]?.id, target: { reply_to: messageId } });
    // The same request_id with another reply_to is another request: the payload hash covers it.
    const other = await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', reply_to: channelId }, body: { content: `reply ${id}` } });
    expect(other.status).toBe(422);
  });

  it('a reply whose answer was lost is still one message', async () => {
    const { messageId } = await posted();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'drop_after_create', times: 1 });
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', reply_to: messageId }, body: { content: `lost ${id}` } });
    await h.waitForState(id, 'delivered');
    expect(landed(`lost ${id}`)).toHaveLength(1);
  });

  it('a reply to a message that is gone is still posted, without the reference', async () => {
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', reply_to: '123456789012345678' }, body: { content: `orphan ${id}` } });
    await h.waitForState(id, 'delivered');
    const m = landed(`orphan ${id}`);
    expect(m).toHaveLength(1);
    expect(m[0]?.message_reference).toBeUndefined();
  });

  it('a post into a thread of the destination\'s channel lands once, in the thread, also when its answer was lost', async () => {
    const thread = h.sandbox.createThread(IDS.channels.alerts, 'incident 42');
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', thread_id: thread.id }, body: { content: `in thread ${id}` } });
    const s = await h.waitForState(id, 'delivered');
    const m = landed(`in thread ${id}`);
    expect(m).toHaveLength(1);
    expect(m[0]?.channel_id).toBe(thread.id);
    expect(String(s['url'])).toBe(`https://discord.com/channels/${IDS.guild}/${thread.id}/${m[0]?.id}`);
    expect(s['target']).toEqual({ guild_id: IDS.guild, destination: 'alerts', thread_id: thread.id });
    // Lost answer: the nonce (and the reconcile) are the thread channel's.
    h.sandbox.inject({ method: 'POST', path: `/channels/${thread.id}/messages$`, action: 'drop_after_create', times: 1 });
    const lost = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: lost, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', thread_id: thread.id, reply_to: m[0]?.id }, body: { content: `lost in thread ${lost}` } });
    await h.waitForState(lost, 'delivered');
    const again = landed(`lost in thread ${lost}`);
    expect(again).toHaveLength(1);
    expect(again[0]?.channel_id).toBe(thread.id);
    expect(again[0]?.message_reference?.message_id).toBe(m[0]?.id);
  });

  it('a thread under another channel is refused UPSTREAM_UNAVAILABLE, with nothing sent', async () => {
    const thread = h.sandbox.createThread(IDS.channels.deals, 'elsewhere');
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts', thread_id: thread.id }, body: { content: `wrong thread ${id}` } });
    expect(await h.waitForState(id, 'failed')).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
    expect(((await h.admin.get(`/admin/deliveries/${id}`)).json as { reason: string }).reason).toMatch(/not a thread of the destination's channel/);
    expect(landed(`wrong thread ${id}`)).toHaveLength(0);
  });

  it('a DM replies to a message in the DM', async () => {
    const dm = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: dm, kind: 'dm', target: { user_id: IDS.user }, body: { content: `dm ${dm}` } });
    await h.waitForState(dm, 'delivered');
    const first = landed(`dm ${dm}`)[0];
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'dm', target: { user_id: IDS.user, reply_to: first?.id }, body: { content: `dm reply ${id}` } });
    expect(await h.waitForState(id, 'delivered')).toMatchObject({ target: { user_id: IDS.user, reply_to: first?.id } });
    expect(landed(`dm reply ${id}`)[0]?.message_reference?.message_id).toBe(first?.id);
  });

  it('refuses a bad reply_to or thread_id with the contract\'s reason, naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ request_id: newRequestId(), kind: 'post', body: { content: 'x' }, target: { guild_id: IDS.guild, destination: 'alerts', reply_to: 'abc' } }, 'target.reply_to must be a message id (a snowflake, or a Slack ts such as 1700000000.000100)'],
      [{ request_id: newRequestId(), kind: 'post', body: { content: 'x' }, target: { guild_id: IDS.guild, destination: 'alerts', reply_to: 12345678 } }, 'target.reply_to must be a message id (a snowflake, or a Slack ts such as 1700000000.000100)'],
      [{ request_id: newRequestId(), kind: 'post', body: { content: 'x' }, target: { guild_id: IDS.guild, destination: 'alerts', thread_id: '' } }, 'target.thread_id must be a thread id (a snowflake, or a Slack ts such as 1700000000.000100)'],
      [{ request_id: newRequestId(), kind: 'dm', body: { content: 'x' }, target: { user_id: IDS.user, reply_to: 'x' } }, 'target.reply_to must be a message id (a snowflake, or a Slack ts such as 1700000000.000100)'],
    ];
    for (const [body, error] of cases) {
      const res = await h.bridge.post('/mcp/deliveries', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json).toEqual({ error });
    }
  });

  it('Slack: a reply and a post into a thread land once with thread_ts', async () => {
    const ref = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: ref, kind: 'post', target: { guild_id: IDS.guild, destination: 'ops' }, body: { content: `slack ${ref}` } });
    await h.waitForState(ref, 'delivered');
    const parent = slack.messages(SLACK.channels.general).find((x) => x.text.includes(ref.slice(0, 16)));
    if (parent === undefined) throw new Error('post not in the Slack sandbox');
    for (const key of ['reply_to', 'thread_id'] as const) {
      const id = newRequestId();
      await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'ops', [key]: parent.ts }, body: { content: `${key} ${id}` } });
      const s = await h.waitForState(id, 'delivered');
      const m = slack.messages(SLACK.channels.general).filter((x) => x.text.includes(`${key} ${id}`));
      expect(m).toHaveLength(1);
      expect(m[0]?.thread_ts).toBe(parent.ts);
      expect(s['target']).toEqual({ guild_id: IDS.guild, destination: 'ops', [key]: parent.ts });
    }
  });

  it('says per platform that Discord and Slack take replies and threads', async () => {
    const full = await h.bridge.get('/mcp/capabilities?include=platforms');
    const platforms = (full.json as { platforms: { name: string; replies: boolean; threads: boolean }[] }).platforms;
    expect(platforms.map((p) => [p.name, p.replies, p.threads])).toEqual([['discord', true, true], ['slack', true, true]]);
  });
});
