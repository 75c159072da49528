import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDS, REQ_A, REQ_B, startTestHerald, type TestHerald } from './support/herald.js';

const post = (overrides: Record<string, unknown> = {}, body: unknown = { content: 'hi' }) => ({
  request_id: REQ_A,
  kind: 'post',
  target: { guild_id: IDS.guild, destination: 'alerts' },
  body,
  ...overrides,
});
const edit = (target: unknown, body: unknown = { content: 'v2' }) => ({ request_id: REQ_B, kind: 'edit', target, body });
const dm = (target: unknown) => ({ request_id: REQ_A, kind: 'dm', target, body: { content: 'hi' } });

const R = {
  object: 'request body must be an object',
  requestId: 'request_id must be a lowercase 64-character hex string',
  kind: 'kind must be "post", "dm" or "edit"',
  body: 'body must be an object',
  content: 'body.content must be 1..2000 characters',
  card: 'body.card must be an object',
  links: 'body.links must be an array',
  editEmpty: 'body must include at least one of content, card or links',
  target: 'target must be an object',
  guild: 'target.guild_id must be a snowflake',
  destination: 'target.destination must be one of alerts, deals, digest, ops',
  user: 'target.user_id must be a snowflake',
  messageRef: 'target.message_ref must be a lowercase 64-character hex string',
  seq: 'target.seq must be an integer from 1 to 2147483647',
};

// docs/protocol.md §3, in order: the first failure wins.
const cases: [string, unknown, string][] = [
  ['an array', [], R.object],
  ['null', null, R.object],
  ['a string', 'post', R.object],
  ['a number', 42, R.object],
  ['no request_id', { kind: 'post' }, R.requestId],
  ['uppercase request_id', post({ request_id: 'A'.repeat(64) }), R.requestId],
  ['63-char request_id', post({ request_id: 'a'.repeat(63) }), R.requestId],
  ['numeric request_id', post({ request_id: 1 }), R.requestId],
  ['request_id before kind', { request_id: 'x', kind: 'nope' }, R.requestId],
  ['no kind', post({ kind: undefined }), R.kind],
  ['unknown kind', post({ kind: 'announce' }), R.kind],
  ['kind before body', post({ kind: 'x', body: 1 }), R.kind],
  ['no body', post({ body: undefined }), R.body],
  ['body an array', post({}, []), R.body],
  ['body before target', post({ target: 1 }, 'x'), R.body],
  ['missing content on post', post({}, {}), R.content],
  ['empty content', post({}, { content: '' }), R.content],
  ['numeric content', post({}, { content: 5 }), R.content],
  ['2001 characters', post({}, { content: 'x'.repeat(2001) }), R.content],
  ['1001 emoji = 2002 UTF-16 units', post({}, { content: '😀'.repeat(1001) }), R.content],
  ['card not an object', post({}, { content: 'x', card: 'c' }), R.card],
  ['card an array', post({}, { content: 'x', card: [] }), R.card],
  ['links not an array', post({}, { content: 'x', links: {} }), R.links],
  ['content before card', post({}, { content: '', card: 1 }), R.content],
  ['dm missing content', { ...dm({ user_id: IDS.user }), body: { card: { title: 't' } } }, R.content],
  ['edit body a string', edit({ message_ref: REQ_A, seq: 1 }, 'v2'), R.body],
  ['edit body an array', edit({ message_ref: REQ_A, seq: 1 }, [{ content: 'v2' }]), R.body],
  ['edit body null', edit({ message_ref: REQ_A, seq: 1 }, null), R.body],
  ['edit body a number', edit({ message_ref: REQ_A, seq: 1 }, 7), R.body],
  ['edit with nothing', edit({ message_ref: REQ_A, seq: 1 }, {}), R.editEmpty],
  ['edit with only unknown keys', edit({ message_ref: REQ_A, seq: 1 }, { text: 'x' }), R.editEmpty],
  ['edit with empty content', edit({ message_ref: REQ_A, seq: 1 }, { content: '' }), R.content],
  ['no target', post({ target: undefined }), R.target],
  ['target an array', post({ target: [] }), R.target],
  ['target a string', post({ target: 'alerts' }), R.target],
  ['post without guild_id', post({ target: { destination: 'alerts' } }), R.guild],
  ['guild_id of 4 digits', post({ target: { guild_id: '1234', destination: 'alerts' } }), R.guild],
  ['guild_id of 26 digits', post({ target: { guild_id: '1'.repeat(26), destination: 'alerts' } }), R.guild],
  ['numeric guild_id', post({ target: { guild_id: 23456789, destination: 'alerts' } }), R.guild],
  ['guild before destination', post({ target: { guild_id: 'x', destination: 'x' } }), R.guild],
  ['unknown destination', post({ target: { guild_id: IDS.guild, destination: 'general' } }), R.destination],
  ['no destination', post({ target: { guild_id: IDS.guild } }), R.destination],
  ['dm without user_id', dm({}), R.user],
  ['user_id with leading 0', dm({ user_id: '023456789012345678' }), R.user],
  ['user_id of 16 digits', dm({ user_id: '1234567890123456' }), R.user],
  ['user_id of 21 digits', dm({ user_id: '123456789012345678901' }), R.user],
  ['edit without message_ref', edit({ seq: 1 }), R.messageRef],
  ['uppercase message_ref', edit({ message_ref: 'A'.repeat(64), seq: 1 }), R.messageRef],
  ['message_ref before seq', edit({ message_ref: 'x', seq: 'x' }), R.messageRef],
  ['seq as a string', edit({ message_ref: REQ_A, seq: '1' }), R.seq],
  ['seq 1.5', edit({ message_ref: REQ_A, seq: 1.5 }), R.seq],
  ['seq 0', edit({ message_ref: REQ_A, seq: 0 }), R.seq],
  ['seq -1', edit({ message_ref: REQ_A, seq: -1 }), R.seq],
  ['seq 2147483648', edit({ message_ref: REQ_A, seq: 2147483648 }), R.seq],
  ['no seq', edit({ message_ref: REQ_A }), R.seq],
  // Herald improves: cards and links are validated deeply.
  ['card title empty', post({}, { content: 'x', card: { title: '' } }), 'body.card.title must be 1..256 characters'],
  ['card title 257', post({}, { content: 'x', card: { title: 't'.repeat(257) } }), 'body.card.title must be 1..256 characters'],
  ['card description 4097', post({}, { content: 'x', card: { description: 'd'.repeat(4097) } }), 'body.card.description must be at most 4096 characters'],
  ['card url http', post({}, { content: 'x', card: { url: 'http://example.com' } }), 'body.card.url must be an https URL'],
  ['card color too big', post({}, { content: 'x', card: { color: 16777216 } }), 'body.card.color must be an integer from 0 to 16777215'],
  ['card color 1.5', post({}, { content: 'x', card: { color: 1.5 } }), 'body.card.color must be an integer from 0 to 16777215'],
  ['card footer 2049', post({}, { content: 'x', card: { footer: 'f'.repeat(2049) } }), 'body.card.footer must be at most 2048 characters'],
  ['card fields not an array', post({}, { content: 'x', card: { fields: {} } }), 'body.card.fields must be an array'],
  ['card 26 fields', post({}, { content: 'x', card: { fields: Array.from({ length: 26 }, () => ({ name: 'n', value: 'v' })) } }), 'body.card.fields must have at most 25 items'],
  ['card field without value', post({}, { content: 'x', card: { fields: [{ name: 'n' }] } }), 'body.card.fields[].value must be 1..1024 characters'],
  ['card field name empty', post({}, { content: 'x', card: { fields: [{ name: '', value: 'v' }] } }), 'body.card.fields[].name must be 1..256 characters'],
  ['card field value 1025', post({}, { content: 'x', card: { fields: [{ name: 'n', value: 'v'.repeat(1025) }] } }), 'body.card.fields[].value must be 1..1024 characters'],
  ['card field inline a string', post({}, { content: 'x', card: { fields: [{ name: 'n', value: 'v', inline: 'yes' }] } }), 'body.card.fields[].inline must be a boolean'],
  ['card field a string', post({}, { content: 'x', card: { fields: ['n'] } }), 'body.card.fields items must be objects'],
  [
    'card over 6000 in total',
    post({}, { content: 'x', card: { title: 't'.repeat(256), description: 'd'.repeat(4096), footer: 'f'.repeat(2048) } }),
    'body.card must total at most 6000 characters',
  ],
  ['6 links', post({}, { content: 'x', links: Array.from({ length: 6 }, () => ({ label: 'l', url: 'https://example.com' })) }), 'body.links must have at most 5 items'],
  ['link label empty', post({}, { content: 'x', links: [{ label: '', url: 'https://example.com' }] }), 'body.links[].label must be 1..80 characters'],
  ['link label 81', post({}, { content: 'x', links: [{ label: 'l'.repeat(81), url: 'https://example.com' }] }), 'body.links[].label must be 1..80 characters'],
  ['link url javascript:', post({}, { content: 'x', links: [{ label: 'l', url: 'javascript:alert(1)' }] }), 'body.links[].url must be an https URL'],
  ['link without url', post({}, { content: 'x', links: [{ label: 'l' }] }), 'body.links[].url must be an https URL'],
  ['link a number', post({}, { content: 'x', links: [1] }), 'body.links items must be objects'],
];

describe('protocol §3: POST /mcp/deliveries validation', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it.each(cases)('%s → 400 with its exact reason, nothing written', async (_name, body, reason) => {
    for (const contentType of ['application/json', 'text/plain']) {
      const res = await h.bridge.call('POST', '/mcp/deliveries', { raw: JSON.stringify(body), headers: { 'content-type': contentType } });
      expect(res.status).toBe(400);
      expect(res.text).toBe(JSON.stringify({ error: reason }));
    }
    for (const id of [REQ_A, REQ_B]) {
      const get = await h.bridge.get(`/mcp/deliveries/${id}`);
      expect(get.status).toBe(404);
      expect(get.text).toBe('{"error":"unknown request_id"}');
    }
  });

  it('accepts the limits themselves: 2000 UTF-16 units, 1000 emoji, 25 fields, 5 links, a 6000-character card', async () => {
    const bodies = [
      { content: 'x'.repeat(2000) },
      { content: '😀'.repeat(1000) },
      { content: 'x', card: { title: 't'.repeat(256), description: 'd'.repeat(4096), footer: 'f'.repeat(1648), color: 16777215, url: 'https://example.com/a' } },
      { content: 'x', card: { fields: Array.from({ length: 25 }, (_, i) => ({ name: `n${i}`, value: 'v', inline: i % 2 === 0 })) } },
      { content: 'x', links: Array.from({ length: 5 }, (_, i) => ({ label: 'l'.repeat(80), url: `https://example.com/${i}` })) },
    ];
    for (const [i, body] of bodies.entries()) {
      const res = await h.bridge.post('/mcp/deliveries', post({ request_id: String(i).repeat(64) }, body));
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(202);
    }
  });

  it('drops unknown keys everywhere and echoes only what it stored', async () => {
    const id = 'c'.repeat(64);
    const res = await h.bridge.post('/mcp/deliveries', {
      request_id: id,
      kind: 'post',
      extra: true,
      target: { destination: 'alerts', guild_id: IDS.guild, channel_id: '1' },
      body: { links: [{ url: 'https://example.com', label: 'L', style: 1 }], content: 'hi', mentions: ['@everyone'], card: { color: 1, title: 'T', x: 1 } },
    });
    expect(res.status).toBe(202);
    const state = (res.json as { state: Record<string, unknown> }).state;
    expect(JSON.stringify(state.target)).toBe(`{"guild_id":"${IDS.guild}","destination":"alerts"}`);
    expect(JSON.stringify(state.body)).toBe('{"content":"hi","card":{"title":"T","color":1},"links":[{"label":"L","url":"https://example.com"}]}');
  });
});
