import { describe, expect, it } from 'vitest';
import { HANDOFF_SCHEMA, handoffContent, isCandidate, validateHandoff, type HandoffEnvelope, type ReceivedMessage, type ReceiveLimits } from '../src/modules/handoffs/envelope.js';

/** The wire format and the receiving checks, as pure functions: one crafted message per failure. */

const SELF = '111111111111111111';
const PEER = '111111111111111112';
const STRANGER = '111111111111111113';
const CHANNEL = '345678901234567890';
const NOW = 1_900_000_000;
const limits: ReceiveLimits = { selfId: SELF, trusted: new Set([PEER]), nowSeconds: NOW, maxExpirySeconds: 3600, maxPayloadBytes: 100_000 };

function envelope(overrides: Partial<Record<keyof HandoffEnvelope, unknown>> = {}): Record<string, unknown> {
  return {
    schema: HANDOFF_SCHEMA,
    source_bot_id: PEER,
    target_bot_id: SELF,
    event_id: '0f8fad5b-d9cb-469f-a165-70867728950e',
    origin_channel_id: CHANNEL,
    origin_thread_id: null,
    origin_message_id: null,
    expires_at: NOW + 300,
    hop_count: 0,
    payload: { text: 'please summarise' },
    ...overrides,
  };
}

function message(body: Record<string, unknown> | string, options: { header?: string; author?: string; bot?: boolean; channel?: string } = {}): ReceivedMessage {
  return {
    authorId: options.author ?? PEER,
    authorIsBot: options.bot ?? true,
    channelId: options.channel ?? CHANNEL,
    content: `${options.header ?? `<@${SELF}>`}\n${typeof body === 'string' ? body : JSON.stringify(body)}`,
  };
}

describe('receiving: each check by itself, first failure wins', () => {
  const cases: [string, ReceivedMessage, string][] = [
    ['not JSON after the header', message('{"schema":"openab.multibot.handoff.v1", oops}'), 'not_json'],
    ['trailing prose after the object', message(`${JSON.stringify(envelope())} thanks!`), 'not_json'],
    ['a source id that is a number', message(envelope({ source_bot_id: 1.2e17 })), 'ids'],
    ['a target id that is not a snowflake', message(envelope({ target_bot_id: 'herald' })), 'ids'],
    ['an origin thread that is not null or a snowflake', message(envelope({ origin_thread_id: '' })), 'ids'],
    ['a missing origin_message_id key', message((({ origin_message_id: _omit, ...rest }) => rest)(envelope())), 'ids'],
    ['another schema version', message(envelope({ schema: 'openab.multibot.handoff.v2' })), 'schema'],
    ['a source that is not the author', message(envelope(), { author: STRANGER }), 'source_mismatch'],
    ['this bot as the source', message(envelope({ source_bot_id: SELF }), { author: SELF }), 'self_source'],
    ['an untrusted source', message(envelope({ source_bot_id: STRANGER }), { author: STRANGER }), 'untrusted_source'],
    ['another target', message(envelope({ target_bot_id: STRANGER })), 'wrong_target'],
    ['a header naming another bot', message(envelope(), { header: `<@${STRANGER}>` }), 'target_header'],
    ['a nickname-style header', message(envelope(), { header: `<@!${SELF}>` }), 'target_header'],
    ['an event_id that is not a UUID', message(envelope({ event_id: 'abc' })), 'event_id'],
    ['an event_id over 64 characters', message(envelope({ event_id: `${'0f8fad5b-d9cb-469f-a165-70867728950e'}${'0'.repeat(40)}` })), 'event_id'],
    ['expired', message(envelope({ expires_at: NOW })), 'expired'],
    ['expiry not an integer', message(envelope({ expires_at: `${NOW + 60}` })), 'expired'],
    ['expiring more than an hour ahead', message(envelope({ expires_at: NOW + 3601 })), 'expires_too_late'],
    ['a second hop', message(envelope({ hop_count: 1 })), 'hop_count'],
    ['sent from another channel', message(envelope({ origin_channel_id: '345678901234567891' })), 'provenance'],
    ['a thread that is not the channel', message(envelope({ origin_thread_id: '345678901234567891' })), 'provenance'],
    ['an empty payload text', message(envelope({ payload: { text: '' } })), 'payload'],
    ['no payload text', message(envelope({ payload: {} })), 'payload'],
    ['a payload over 100,000 bytes', message(envelope({ payload: { text: 'é'.repeat(50_001) } })), 'payload'],
    ['a payload holding U+0000 (the store cannot keep it)', message(envelope({ payload: { text: 'a\u0000b' } })), 'payload'],
  ];
  it.each(cases)('%s → %s', (_name, m, reason) => {
    expect(validateHandoff(m, limits)).toEqual({ kind: 'rejected', reason });
  });

  it('accepts a well-formed envelope from a trusted bot, expiring exactly an hour ahead', () => {
    const verdict = validateHandoff(message(envelope({ expires_at: NOW + 3600 })), limits);
    expect(verdict.kind).toBe('valid');
  });

  it('takes an event_id in any case, in its canonical lower-case form (what the replay check compares)', () => {
    const verdict = validateHandoff(message(envelope({ event_id: '0F8FAD5B-D9CB-469F-A165-70867728950E' })), limits);
    expect(verdict.kind === 'valid' ? verdict.envelope.event_id : verdict).toBe('0f8fad5b-d9cb-469f-a165-70867728950e');
  });

  it('accepts a thread handoff whose thread is the channel it arrived in', () => {
    expect(validateHandoff(message(envelope({ origin_thread_id: CHANNEL })), limits).kind).toBe('valid');
  });
});

describe('candidates', () => {
  it('a human-authored envelope is an ordinary message, never a handoff', () => {
    expect(validateHandoff(message(envelope(), { bot: false }), limits)).toEqual({ kind: 'not_candidate' });
  });

  it('prose that quotes the schema is not a candidate', () => {
    const prose = message(`I will use the ${HANDOFF_SCHEMA} format, e.g. {"schema":"${HANDOFF_SCHEMA}"}`);
    expect(isCandidate(prose)).toBe(false);
    expect(validateHandoff(prose, limits)).toEqual({ kind: 'not_candidate' });
  });

  it('a JSON object that does not name the schema, or a first line that is not a mention, is not a candidate', () => {
    expect(validateHandoff(message('{"task":"x"}'), limits)).toEqual({ kind: 'not_candidate' });
    expect(validateHandoff(message(envelope(), { header: `hey <@${SELF}>` }), limits)).toEqual({ kind: 'not_candidate' });
    expect(validateHandoff({ ...message(envelope()), content: JSON.stringify(envelope()) }, limits)).toEqual({ kind: 'not_candidate' });
  });
});

describe('building', () => {
  it('puts the target mention on the first line and every key, in order, on the second', () => {
    const content = handoffContent(envelope() as unknown as HandoffEnvelope);
    const [header, body] = content.split('\n');
    expect(header).toBe(`<@${SELF}>`);
    expect(Object.keys(JSON.parse(body ?? '{}') as object)).toEqual([
      'schema',
      'source_bot_id',
      'target_bot_id',
      'event_id',
      'origin_channel_id',
      'origin_thread_id',
      'origin_message_id',
      'expires_at',
      'hop_count',
      'payload',
    ]);
  });

  it('keeps raw @everyone and <@id> in the payload text for the agent', () => {
    const text = `@everyone look, and ping <@${STRANGER}> too`;
    const content = handoffContent(envelope({ payload: { text }, source_bot_id: PEER }) as unknown as HandoffEnvelope);
    const verdict = validateHandoff({ authorId: PEER, authorIsBot: true, channelId: CHANNEL, content }, limits);
    expect(verdict.kind === 'valid' ? verdict.envelope.payload.text : undefined).toBe(text);
  });
});
