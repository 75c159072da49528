import { LogLevel, WebClient, type Logger as SlackLogger } from '@slack/web-api';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS, SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { SlackChat } from '../src/platforms/slack/slack-chat.js';
import type { SlackCaller } from '../src/platforms/slack/slack-chat-errors.js';
import { splitForSlack } from '../src/platforms/slack/slack-chat-split.js';
import { TransportError, type ChatSendProof } from '../src/platforms/platform.js';
import { waitFor } from './support/wait.js';

const { channels, users, bot } = SLACK_SANDBOX_IDS;
const never = new AbortController().signal;
/** Slack's client quiet: the failures it would warn about are the point of some tests. */
const SILENT: SlackLogger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined, setLevel: () => undefined, getLevel: () => LogLevel.ERROR, setName: () => undefined };

/** What a proof needs besides `since`: nothing else is known as another send's, and there are no twins. */
function proofSince(since: Date, text = '', sender = ''): ChatSendProof {
  return { text, sender, since, taken: () => Promise.resolve(new Set()), twins: () => Promise.resolve(false) };
}

/**
 * A caller shaped like the transport's own (failures already TransportErrors naming Slack's error
 * code in their detail; a create past its deadline held back), over a WebClient.
 */
function callerOver(web: WebClient): SlackCaller {
  return {
    async call(method, args, options) {
      // The transport's caller holds a create back past its deadline, after its rate budget.
      if (options?.deadline !== undefined && Date.now() > options.deadline.notAfter.getTime()) throw new TransportError({ kind: 'transient', detail: 'create abandoned before it left', departedLate: true });
      try {
        return await web.apiCall(method, args);
      } catch (err) {
        const { data, retryAfter } = err as { data?: { error?: string }; retryAfter?: number };
        if (retryAfter !== undefined) throw new TransportError({ kind: 'transient', retryAfterMs: retryAfter * 1000, detail: `slack rate limited on ${method}` });
        if (data?.error !== undefined) throw new TransportError({ kind: data.error === 'channel_not_found' ? 'not_found' : 'rejected', detail: `slack ${data.error} on ${method}` });
        throw new TransportError({ kind: 'transient', mayHaveCreated: true, detail: `slack unreachable on ${method}` });
      }
    },
  };
}

/** The chat facet on Slack, against the Slack sandbox through Slack's own WebClient, plain or wrapped as the transport's caller. */
describe.each([['a WebClient'], ['the transport caller']])('SlackChat against the Slack sandbox, through %s', (kind) => {
  let sandbox: SlackSandbox;
  let client: WebClient;
  let chat: SlackChat;

  beforeAll(async () => {
    // Posting limits raised: these tests post many parts in a row (the limits have their own tests).
    sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1000, tierScale: 100 });
    await sandbox.start();
    // As Herald's wiring builds it: a create is never retried by the client itself.
    client = new WebClient(sandbox.botToken, { slackApiUrl: sandbox.apiUrl, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true, logger: SILENT });
    chat = new SlackChat({ client: kind === 'a WebClient' ? client : callerOver(client), log: pino({ level: 'silent' }), selfId: () => Promise.resolve(bot.user) });
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it('posts under the sender name with the key in metadata, mention-inert, and reads it back under that name', async () => {
    const sent = await chat.send('general', 'hello <!channel> & <@U0BOB000001>', 'ada-agent', 'key-hello', new Map(), never);
    expect(sent.confirmed).toBe(true);
    expect(sent.messageIds).toHaveLength(1);
    const [stored] = sandbox.messages(channels.general).filter((m) => m.ts === sent.messageIds[0]);
    expect(stored).toMatchObject({ username: 'ada-agent', metadata: { event_type: 'herald_delivery', event_payload: { id: 'key-hello', part: 0 } } });
    // Escaped: Slack shows the characters and notifies no one.
    expect(stored?.text).toBe('hello &lt;!channel&gt; &amp; &lt;@U0BOB000001&gt;');
    const [line] = await chat.read('#general', undefined, 1);
    expect(line).toMatchObject({ nick: 'ada-agent', text: 'hello <!channel> & <@U0BOB000001>' });
  });

  it('splits a long text at line breaks into parts of at most 4,000 characters, each marked with its index', async () => {
    const paragraphs = ['a'.repeat(3000), 'b'.repeat(3000), 'c'.repeat(3000)];
    const sent = await chat.send('general', paragraphs.join('\n'), 'splitter', 'key-long', new Map(), never);
    expect(sent.messageIds).toHaveLength(3);
    const stored = sandbox.messages(channels.general).filter((m) => m.metadata?.event_payload['id'] === 'key-long');
    expect(stored.map((m) => m.text)).toEqual(paragraphs);
    expect(stored.map((m) => m.metadata?.event_payload['part'])).toEqual([0, 1, 2]);
    expect(stored.map((m) => m.ts)).toEqual(sent.messageIds);
  });

  it('a retry sends only the parts not in alreadySent, and keeps the ids it was given', async () => {
    const text = ['x'.repeat(3000), 'y'.repeat(3000), 'z'.repeat(3000)].join('\n');
    const before = sandbox.calls('chat.postMessage');
    const sent = await chat.send('general', text, 'retrier', 'key-retry', new Map([[0, '1700000000.000001']]), never);
    expect(sandbox.calls('chat.postMessage') - before).toBe(2);
    expect(sent.messageIds[0]).toBe('1700000000.000001');
    const stored = sandbox.messages(channels.general).filter((m) => m.metadata?.event_payload['id'] === 'key-retry');
    expect(stored.map((m) => m.metadata?.event_payload['part'])).toEqual([1, 2]);
  });

  it('sentParts finds the parts by their key exactly: a same-text message without it, or with another key, is not one', async () => {
    const since = new Date();
    const text = ['first half '.repeat(300), 'second half '.repeat(300)].join('\n');
    const sent = await chat.send('general', text, 'prover', 'key-proof', new Map(), never);
    expect(sent.messageIds).toHaveLength(2);
    // The same text under the same name, once without metadata and once under another send's key.
    const [firstPart = ''] = splitForSlack(text);
    await client.chat.postMessage({ channel: channels.general, text: firstPart, username: 'prover' });
    await client.chat.postMessage({ channel: channels.general, text: firstPart, username: 'prover', metadata: { event_type: 'herald_delivery', event_payload: { id: 'key-proof-other', part: 0 } } });
    const found = await chat.sentParts('general', 'key-proof', never, proofSince(since, text, 'prover'));
    expect(found).toEqual(new Map([[0, sent.messageIds[0]], [1, sent.messageIds[1]]]));
    expect(await chat.sentParts('general', 'key-never-sent', never, proofSince(since))).toEqual(new Map());
    // Keys are compared whole: a prefix of a key finds nothing.
    expect(await chat.sentParts('general', 'key-pro', never, proofSince(since))).toEqual(new Map());
  });

  it('after an answer lost mid-send, sentParts finds the part Slack created and the retry sends only the rest, each part once', async () => {
    const since = new Date();
    const text = ['lost answer '.repeat(300), 'sent later '.repeat(300)].join('\n');
    sandbox.faults.dropAnswerAfterCreate(1);
    const failure = await chat.send('general', text, 'crasher', 'key-lost', new Map(), never).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(TransportError);
    expect((failure as TransportError).failure).toMatchObject({ kind: 'transient', mayHaveCreated: true });
    const found = await chat.sentParts('general', 'key-lost', never, proofSince(since, text, 'crasher'));
    expect([...(found?.keys() ?? [])]).toEqual([0]);
    const sent = await chat.send('general', text, 'crasher', 'key-lost', found ?? new Map(), never);
    const stored = sandbox.messages(channels.general).filter((m) => m.metadata?.event_payload['id'] === 'key-lost');
    expect(stored.map((m) => m.metadata?.event_payload['part'])).toEqual([0, 1]);
    expect(sent.messageIds).toEqual(stored.map((m) => m.ts));
  });

  it('sentParts reads every page of the history: a part older than 200 later messages is still found', async () => {
    const since = new Date();
    const sent = await chat.send('general', 'buried part', 'digger', 'key-buried', new Map(), never);
    for (let i = 0; i < 210; i++) await client.chat.postMessage({ channel: channels.general, text: `filler ${i}` });
    const before = sandbox.calls('conversations.history');
    const found = await chat.sentParts('general', 'key-buried', never, proofSince(since, 'buried part', 'digger'));
    expect(found).toEqual(new Map([[0, sent.messageIds[0]]]));
    expect(sandbox.calls('conversations.history') - before).toBeGreaterThan(1);
  });

  it('a rate-limited part is waited out and posted once; a 5xx may have created it; a late part never leaves', async () => {
    sandbox.faults.rateLimitNext('chat.postMessage', 1);
    const limited = await chat.send('general', 'after the limit', 'waiter', 'key-429', new Map(), never);
    expect(sandbox.messages(channels.general).filter((m) => m.metadata?.event_payload['id'] === 'key-429').map((m) => m.ts)).toEqual(limited.messageIds);
    sandbox.faults.failNext('chat.postMessage', 503);
    const failed = await chat.send('general', 'into a 503', 'waiter', 'key-503', new Map(), never).catch((err: unknown) => err);
    expect((failed as TransportError).failure).toMatchObject({ kind: 'transient', mayHaveCreated: true });
    const before = sandbox.calls('chat.postMessage');
    const late = await chat.send('general', 'too late', 'waiter', 'key-late', new Map(), never, { notAfter: new Date(Date.now() - 1) }).catch((err: unknown) => err);
    expect((late as TransportError).failure).toMatchObject({ kind: 'transient', departedLate: true });
    expect(sandbox.calls('chat.postMessage')).toBe(before);
  });

  it('sentParts throws a passing failure (to be tried again) rather than answering', async () => {
    sandbox.faults.failNext('conversations.history', 500);
    const failure = await chat.sentParts('general', 'key-any', never, proofSince(new Date())).catch((err: unknown) => err);
    expect((failure as TransportError).failure.kind).toBe('transient');
  });

  it('sentParts is undefined when the channel cannot be read, never a guess', async () => {
    expect(await chat.sentParts('C0NOSUCH001', 'key-any', never, proofSince(new Date()))).toBeUndefined();
  });

  it('read gives lines newest first; since excludes its own moment and everything before', async () => {
    await chat.createChannel('reading');
    const first = await chat.send('reading', 'first line', 'reader', 'key-r1', new Map(), never);
    // Lines are dated to the millisecond, and since excludes its whole millisecond: the next line comes later.
    const firstMs = Math.floor(Number(first.messageIds[0]) * 1000);
    await waitFor(() => Date.now() > firstMs + 1, 'the clock to pass the first line');
    sandbox.say(users.bob, 'reading', 'second line');
    await chat.send('reading', 'third line', 'reader', 'key-r3', new Map(), never);
    const all = await chat.read('reading', undefined, 50);
    expect(all.map((l) => [l.nick, l.text])).toEqual([
      ['reader', 'third line'],
      ['bob', 'second line'],
      ['reader', 'first line'],
    ]);
    const firstAt = all[2]?.at ?? new Date(0);
    expect(firstAt.getTime()).toBe(Math.floor(Number(first.messageIds[0]) * 1000));
    const after = await chat.read('reading', firstAt, 50);
    expect(after.map((l) => l.text)).toEqual(['third line', 'second line']);
    expect((await chat.read('reading', undefined, 2)).map((l) => l.text)).toEqual(['third line', 'second line']);
    expect(await chat.read('reading', new Date(Date.now() + 60_000), 50)).toEqual([]);
  });

  it('a channel the bot is not in is joined on the first send', async () => {
    expect(await chat.members('alerts')).toEqual(['ada']);
    const sent = await chat.send('alerts', 'anyone here?', 'joiner', 'key-join', new Map(), never);
    expect(sandbox.messages(channels.alerts).filter((m) => m.metadata?.event_payload['id'] === 'key-join').map((m) => m.ts)).toEqual(sent.messageIds);
  });

  it('creates channels, joins one that exists, and lists them by name', async () => {
    expect(await chat.createChannel('#Deploys')).toBe('deploys');
    // Taken: the existing channel is joined, not an error.
    expect(await chat.createChannel('general')).toBe('general');
    const listed = await chat.listChannels();
    expect(listed).toEqual(expect.arrayContaining(['alerts', 'deploys', 'general']));
    expect(listed).toEqual([...listed].sort());
    const refused = await chat.createChannel('has spaces').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(TransportError);
    expect((refused as TransportError).failure.kind).toBe('rejected');
  });

  it('members gives display names, never Herald itself; an unknown channel is not_found', async () => {
    expect(await chat.members('general')).toEqual(['ada', 'bob']);
    const missing = await chat.members('no-such-channel').catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(TransportError);
    expect((missing as TransportError).failure.kind).toBe('not_found');
  });
});

/** What needs no Slack: splitting, and the names Slack accepts. */
describe('SlackChat without Slack', () => {
  const chat = new SlackChat({ client: { call: () => Promise.reject(new Error('no Slack here')) }, log: pino({ level: 'silent' }), selfId: () => Promise.resolve(bot.user) });

  it('splits a line without breaks at whitespace or, failing that, between graphemes, losing nothing', () => {
    const words = Array.from({ length: 1500 }, (_, i) => `word${i}`).join(' ');
    const parts = splitForSlack(words);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((p) => p.length <= 4000)).toBe(true);
    expect(parts.join(' ')).toBe(words);
    // An emoji with a skin tone is two UTF-16 pairs: never cut between them.
    const emoji = '👍🏽'.repeat(3000);
    const cut = splitForSlack(emoji);
    expect(cut.join('')).toBe(emoji);
    expect(cut.every((p) => p.length <= 4000 && p.length % 4 === 0)).toBe(true);
    expect(splitForSlack('one\n\n\ntwo', 4)).toEqual(['one', 'two']);
  });

  it('checks names as Slack has them', () => {
    expect(chat.checkChannel('general')).toBeUndefined();
    expect(chat.checkChannel('#ops-team_2')).toBeUndefined();
    expect(chat.checkChannel('C0GENERAL01')).toBeUndefined();
    expect(chat.checkChannel('has space')).toMatch(/Slack channel name/);
    expect(chat.checkChannel('x'.repeat(81))).toMatch(/Slack channel name/);
    expect(chat.checkSender('Ada (agent)')).toBeUndefined();
    expect(chat.checkSender('')).toMatch(/1..80/);
    expect(chat.checkSender('a'.repeat(81))).toMatch(/1..80/);
    expect(chat.checkSender('two\nlines')).toMatch(/control/);
  });
});
