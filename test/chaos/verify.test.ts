import { describe, expect, it } from 'vitest';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import type { SandboxMessage } from '../../src/sandbox/sandbox.js';
import type { DeletedMessage } from '../../src/sandbox/state.js';
import type { Tracked } from './connector.js';
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
