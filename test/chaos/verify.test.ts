import { describe, expect, it } from 'vitest';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import type { SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { DeletedMessage } from '../../src/platforms/discord/sandbox/state.js';
import type { Tracked } from './connector.js';
import { permalink as slackPermalink, verifySlack, type SlackChannelMessage } from './slack-verify.js';
import { verify, type FinalState } from './verify.js';

/**
 * The default-window verdict on files and deletes must be able to fail: a file post whose message
 * carries other files, two messages for one file post, a delete that left its message, deleted it
 * twice or let it come back, and a message gone that no delete asked for.
 */

const channel = '345678901234567890';
const base = { phase: 'default-window', connector: 0, payload: {}, last: undefined, nextSeq: 1, edits: [], createdAt: 0, accepted: true, posts: 1, failedReposts: 0, gaveUp: false, lastCheck: 0, unknownReposts: 0, nextUnknownRepost: 0, busy: false, vanished: undefined, deliveredUrl: undefined, regressed: undefined, timeline: [] };
const filePost: Tracked = { ...base, requestId: 'a'.repeat(64), kind: 'post', content: 'with files', destination: 'alerts', attachments: [{ file: 'f'.repeat(64), filename: 'a.bin', size: 10 }] };
const post: Tracked = { ...base, requestId: 'b'.repeat(64), kind: 'post', content: 'plain', destination: 'alerts', deletedBy: 'c'.repeat(64) };
const del: Tracked = { ...base, requestId: 'c'.repeat(64), kind: 'delete', content: 'delete', original: post.requestId };
const url = (id: string) => `https://discord.com/channels/234567890123456789/${channel}/${id}`;
const finals = new Map<string, FinalState>([
  [filePost.requestId, { status: 200, state: { state: 'delivered', kind: 'post', url: url('100') } }],
  [post.requestId, { status: 200, state: { state: 'delivered', kind: 'post', url: url('200') } }],
  [del.requestId, { status: 200, state: { state: 'delivered', kind: 'delete' } }],
]);
const message = (id: string, owner: Tracked, attachments: { filename: string; size: number }[] = []): SandboxMessage =>
  ({ id, channel_id: channel, author: { id: 'bot' }, content: owner.content, embeds: [], components: [], timestamp: '', edited_timestamp: null, type: 0, nonce: deliveryNonce(owner.requestId), edits: 0, attachments }) as unknown as SandboxMessage;
const deleted = (id: string): DeletedMessage => ({ id, channel_id: channel, author_id: 'bot', deleted_at: '', deleted_by: 'bot' });
const good = message('100', filePost, [{ filename: 'a.bin', size: 10 }]);

function run(messages: SandboxMessage[], gone: DeletedMessage[]) {
  return verify({ tracked: [filePost, post, del], finals, messages, deleted: gone, channels: { alerts: channel }, dmChannels: [], rows: new Map(), logsFor: () => [] });
}

describe('chaos verdict: files and deletes', () => {
  it('passes one message with exactly its files, and a message deleted once on request', () => {
    const { counts, violations } = run([good], [deleted('200')]);
    expect(violations).toEqual([]);
    expect(counts).toMatchObject({ files: 1, filesShown: 1, deletes: 1, deletesDone: 1 });
  });

  it.each([
    ['other files on its message', [message('100', filePost, [{ filename: 'a.bin', size: 11 }])], [deleted('200')], 'lost', /carries \[a\.bin 11\], not its files \[a\.bin 10\]/],
    ['a second message for a file post', [good, message('101', filePost, [{ filename: 'a.bin', size: 10 }])], [deleted('200')], 'duplicate', /2 messages carry/],
    ['a delete that left its message', [good, message('200', post)], [], 'lost', /delete reported delivered, but message 200 is still there/],
    ['a message deleted twice', [good], [deleted('200'), deleted('200')], 'duplicate', /recorded deleted 2 times/],
    ['a deleted message back again', [good, message('200', post)], [deleted('200')], 'duplicate', /was deleted, yet shows again/],
    ['a message gone that no delete asked for', [], [deleted('200'), deleted('100')], 'lost', /100 was deleted .* though no delete asked for it/],
  ] as const)('flags %s', (_name, messages, gone, kind, detail) => {
    const { violations } = run([...messages], [...gone]);
    expect(violations.some((v) => v.kind === kind && detail.test(v.detail)), JSON.stringify(violations.map((v) => [v.kind, v.detail]))).toBe(true);
  });
});

/**
 * The verdicts the pause and partition phases added: a delivery whose state or url changed after it
 * was delivered (seen by a connector, at the end, or in the store), an edit shown out of order, and
 * a shared group's twin that ends unknown. Each is a violation.
 */
describe('chaos verdict: stale writes, out-of-order edits, unknown twins', () => {
  const original: Tracked = { ...base, requestId: 'd'.repeat(64), kind: 'post', content: 'v0', destination: 'alerts', edits: ['e'.repeat(64), 'f'.repeat(64)] };
  const edit1: Tracked = { ...base, requestId: 'e'.repeat(64), kind: 'edit', content: 'v1', seq: 1, original: original.requestId };
  const edit2: Tracked = { ...base, requestId: 'f'.repeat(64), kind: 'edit', content: 'v2', seq: 2, original: original.requestId };
  const twinA: Tracked = { ...base, requestId: '1'.repeat(64), kind: 'post', content: 'same', destination: 'alerts', group: 'g0-1', payload: { body: { content: 'same' } } };
  const twinB: Tracked = { ...base, requestId: '2'.repeat(64), kind: 'post', content: 'same', destination: 'alerts', group: 'g0-1', payload: { body: { content: 'same' } } };
  const delivered = (u: string, extra: Record<string, unknown> = {}): FinalState => ({ status: 200, state: { state: 'delivered', kind: 'post', url: u, ...extra } });
  const edited: FinalState = { status: 200, state: { state: 'delivered', kind: 'edit', url: url('300'), applied: true } };
  const shown = (content: string, edits: number): SandboxMessage => ({ ...message('300', original), content, edits }) as SandboxMessage;

  function check(over: { tracked?: Tracked[]; finals?: [string, FinalState][]; messages?: SandboxMessage[]; staleRows?: Map<string, string> }) {
    const tracked = over.tracked ?? [original, edit1, edit2];
    const all = new Map<string, FinalState>([[original.requestId, delivered(url('300'))], [edit1.requestId, edited], [edit2.requestId, edited], ...(over.finals ?? [])]);
    return verify({ tracked, finals: all, messages: over.messages ?? [shown('v2', 2)], channels: { alerts: channel }, dmChannels: [], rows: new Map(), logsFor: () => [], ...(over.staleRows ? { staleRows: over.staleRows } : {}) });
  }
  const kinds = (r: ReturnType<typeof check>) => r.violations.map((v) => v.kind);

  it('passes edits shown in order, a delivery unchanged and twins both delivered', () => {
    const r = check({});
    expect(r.violations).toEqual([]);
    const twins = check({ tracked: [twinA, twinB], finals: [[twinA.requestId, delivered(url('400'))], [twinB.requestId, delivered(url('401'))]], messages: [message('400', twinA), message('401', twinB)] });
    expect(twins.violations).toEqual([]);
  });

  it('flags a delivery whose url changed after a connector saw it delivered', () => {
    const r = check({ tracked: [{ ...original, edits: [], regressed: `reported delivered at ${url('300')}, later delivered at ${url('301')} (poll)` }], messages: [shown('v0', 0)] });
    expect(kinds(r)).toContain('stale-write');
    expect(r.counts.staleWrites).toBe(1);
  });

  it('flags a delivery whose final state differs from the delivered one first seen', () => {
    const r = check({ tracked: [{ ...original, edits: [], deliveredUrl: url('300') }], finals: [[original.requestId, { status: 200, state: { state: 'unknown', kind: 'post' } }]], messages: [shown('v0', 0)] });
    expect(kinds(r)).toContain('stale-write');
  });

  it('flags a row the store showed changed after delivery, even when it ends as first delivered', () => {
    const r = check({ tracked: [{ ...original, edits: [] }], messages: [shown('v0', 0)], staleRows: new Map([[original.requestId, 'row was delivered …/300, then pending']]) });
    expect(kinds(r)).toEqual(['stale-write']);
    expect(r.counts.staleWrites).toBe(1);
  });

  it('flags an edit applied out of order: the message shows seq 1 while seq 2 is reported applied', () => {
    const r = check({ messages: [shown('v1', 2)] });
    expect(kinds(r)).toContain('edit-order');
    expect(r.violations.find((v) => v.kind === 'edit-order')?.detail).toMatch(/final content is seq 1's .* expected seq 2's/);
  });

  it("flags a shared group's twin that ends unknown", () => {
    const r = check({
      tracked: [twinA, twinB],
      finals: [[twinA.requestId, delivered(url('400'))], [twinB.requestId, { status: 200, state: { state: 'unknown', kind: 'post' } }]],
      messages: [message('400', twinA), message('401', twinB)],
    });
    expect(kinds(r)).toContain('unknown-twin');
    expect(r.counts.unknownTwins).toBe(1);
    expect(r.violations.find((v) => v.kind === 'unknown-twin')?.requestIds).toEqual([twinB.requestId]);
  });
});

/** The default window's two bots: a message must come from the bot its agent is bound to. */
describe('chaos verdict: identities', () => {
  const opsPost: Tracked = { ...base, connector: 1, requestId: '9'.repeat(64), kind: 'post', content: 'from ops', destination: 'alerts' };
  const finalsOps = new Map<string, FinalState>([[opsPost.requestId, { status: 200, state: { state: 'delivered', kind: 'post', url: url('900') } }]]);
  const from = (author: string): SandboxMessage => ({ ...message('900', opsPost), author: { id: author } }) as unknown as SandboxMessage;
  const judge = (m: SandboxMessage) =>
    verify({ tracked: [opsPost], finals: finalsOps, messages: [m], channels: { alerts: channel }, dmChannels: [], rows: new Map(), logsFor: () => [], authorOf: (t) => (t.connector % 2 === 1 ? 'ops-bot' : 'bot') });

  it('passes a message from its agent’s bot', () => {
    expect(judge(from('ops-bot')).violations).toEqual([]);
  });

  it('flags a message sent as another bot than its agent’s', () => {
    const { violations, counts } = judge(from('bot'));
    expect(counts.misattributed).toBe(1);
    expect(violations.some((v) => v.kind === 'misattributed' && /sent as bot bot, not as its agent's ops-bot/.test(v.detail))).toBe(true);
  });
});

/** The Slack phases' two workspaces: a message must be in its agent's workspace's channel, from that workspace's bot. */
describe('chaos verdict: Slack workspaces', () => {
  const opsPost: Tracked = { ...base, connector: 1, requestId: '8'.repeat(64), kind: 'post', content: 'from ops', destination: 'alerts', payload: { target: { guild_id: '2', destination: 'alerts' } } };
  const workspaceUrl = 'http://127.0.0.1:1/T0SANDBOX02/';
  const finalsOps = new Map<string, FinalState>([[opsPost.requestId, { status: 200, state: { state: 'delivered', kind: 'post', url: slackPermalink(workspaceUrl, 'C0OPS', '1700000000.000100') } }]]);
  const from = (user: string, channel = 'C0OPS'): SlackChannelMessage => ({ ts: '1700000000.000100', user, text: 'from ops', channel, metadata: { event_type: 'herald_delivery', event_payload: { id: deliveryNonce(opsPost.requestId) } } });
  const judge = (m: SlackChannelMessage) =>
    verifySlack({
      tracked: [opsPost],
      finals: finalsOps,
      messages: [m],
      channelOf: (t) => (({ '1/alerts': 'C0DEFAULT', '2/alerts': 'C0OPS' }) as Record<string, string>)[`${String((t.payload['target'] as { guild_id: string }).guild_id)}/${t.destination ?? ''}`],
      botOf: (t) => (t.connector % 2 === 1 ? 'U0OPSBOT' : 'U0BOT'),
      workspaceUrlOf: () => workspaceUrl,
      rows: new Map(),
      logsFor: () => [],
    });

  it("passes a message in its guild's channel from its workspace's bot", () => {
    expect(judge(from('U0OPSBOT')).violations).toEqual([]);
  });

  it("flags a message sent by another workspace's bot", () => {
    const { violations, counts } = judge(from('U0BOT'));
    expect(counts.misattributed).toBe(1);
    expect(violations.some((v) => v.kind === 'misattributed' && /is from U0BOT, not its identity's bot U0OPSBOT/.test(v.detail))).toBe(true);
  });

  it("flags a message in the other workspace's channel", () => {
    const { counts, violations } = judge(from('U0OPSBOT', 'C0DEFAULT'));
    expect(counts.misattributed).toBe(1);
    expect(violations.some((v) => /is in C0DEFAULT, not C0OPS/.test(v.detail))).toBe(true);
  });
});

/**
 * A post to another identity's guild (the slack phases' ops guild on Discord): its url must name the
 * guild its target names, and its message must come from that guild's bot.
 */
describe('chaos verdict: a post to another guild', () => {
  const opsGuild = '234567890123456781';
  const opsPost: Tracked = { ...base, requestId: '3'.repeat(64), kind: 'post', content: 'ops', destination: 'digest', payload: { target: { guild_id: opsGuild, destination: 'digest' } } };
  const at = (guild: string) => new Map<string, FinalState>([[opsPost.requestId, { status: 200, state: { state: 'delivered', kind: 'post', url: `https://discord.com/channels/${guild}/${channel}/300` } }]]);
  const shown = (author: string) => ({ ...message('300', opsPost), author: { id: author } }) as unknown as SandboxMessage;
  const judge = (finals: Map<string, FinalState>, author: string) => verify({ tracked: [opsPost], finals, messages: [shown(author)], channels: { digest: channel }, dmChannels: [], rows: new Map(), logsFor: () => [], authorOf: () => 'ops-bot' }).violations;

  it('passes its message at its own guild, from its bot', () => {
    expect(judge(at(opsGuild), 'ops-bot')).toEqual([]);
  });
  it('flags a url naming another guild, and a message from another bot', () => {
    expect(judge(at('234567890123456789'), 'ops-bot').map((v) => v.detail)).toEqual(['url scope 234567890123456789 does not fit a post']);
    expect(judge(at(opsGuild), 'default-bot').map((v) => v.kind)).toEqual(['misattributed']);
  });
});
