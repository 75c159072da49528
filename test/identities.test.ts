import { readFile } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { parsePolicy } from '../src/infra/policy/policy.js';
import { McpPolicy } from '../src/mcp/policy.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { speakingAs, type Platform } from '../src/platforms/platform.js';
import { newRequestId, post, type TestHerald } from './support/herald.js';
import { startTwoBots, type TwoBots } from './support/two-bots.js';
import { waitFor } from './support/wait.js';

// Several Discord bots in one Herald (HERALD_DISCORD_IDENTITIES), each agent bound by the operator's
// policy to the one it speaks as: black-box over HTTP against the Discord sandbox, through discord.js.
const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-main: { identity: default }
`;

describe('two Discord bots, two agents, each speaking only as its own', { timeout: 120_000 }, () => {
  let bots: TwoBots;
  let h: TestHerald;
  let sandbox: DiscordSandbox;
  let ops: { id: string; token: string };
  const logged: string[] = [];
  const as = (client: string) => bots.as(client);
  const sentBy = (content: string) => [...sandbox.messages.values()].flat().filter((m) => m.content === content).map((m) => m.author.id);
  const settled = (requestId: string, client: string): Promise<Record<string, unknown>> => bots.settled(requestId, client);

  beforeAll(async () => {
    const logTo = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(chunk.toString('utf8'));
        done();
      },
    });
    bots = await startTwoBots(POLICY, { logTo, env: { LOG_LEVEL: 'info' } });
    ({ h, sandbox, ops } = bots);
  });
  afterAll(() => bots?.close());

  it('posts as the bot the agent is bound to, and shows each agent its own deliveries only', async () => {
    const mine = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(mine, 'from the ops agent'), as('agent-ops'))).status).toBe(202);
    const st = await settled(mine, 'agent-ops');
    expect(st).toMatchObject({ state: 'delivered' });
    expect(sentBy('from the ops agent')).toEqual([ops.id]);
    const theirs = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(theirs, 'from the main agent'), as('agent-main'))).status).toBe(202);
    expect(await settled(theirs, 'agent-main')).toMatchObject({ state: 'delivered' });
    expect(sentBy('from the main agent')).toEqual([sandbox.bot.id]);
    // Another identity's delivery is not found, however it is asked for; its request_id again is a reuse.
    for (const who of ['agent-main', 'connector-like', 'agent-opsx']) expect((await h.bridge.get(`/mcp/deliveries/${mine}`, as(who))).status, who).toBe(404);
    expect((await h.bridge.get(`/mcp/deliveries/${mine}`)).status).toBe(404);
    expect((await h.bridge.post('/mcp/deliveries', post(mine, 'from the ops agent'), as('agent-main'))).status).toBe(422);
    expect(sentBy('from the ops agent')).toHaveLength(1);
  });

  it("refuses another bot's message to an edit, a delete and a reaction: nothing changes on Discord", async () => {
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, 'ops says'), as('agent-ops'));
    await settled(original, 'agent-ops');
    const acts = [
      { kind: 'edit', target: { message_ref: original, seq: 1 }, body: { content: 'hijacked' } },
      { kind: 'delete', target: { message_ref: original }, body: {} },
      { kind: 'reaction', target: { message_ref: original }, body: { emoji: '👎' } },
    ];
    for (const act of acts) {
      const id = newRequestId();
      expect((await h.bridge.post('/mcp/deliveries', { request_id: id, ...act }, as('agent-main'))).status, act.kind).toBe(202);
      expect(await settled(id, 'agent-main'), act.kind).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    }
    const [message] = [...sandbox.messages.values()].flat().filter((m) => m.content === 'ops says');
    expect(message?.author.id).toBe(ops.id);
    expect(message?.reactions ?? []).toEqual([]);
    // Its own agent may.
    const edit = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: edit, kind: 'edit', target: { message_ref: original, seq: 1 }, body: { content: 'ops says, edited' } }, as('agent-ops'));
    expect(await settled(edit, 'agent-ops')).toMatchObject({ state: 'delivered' });
    expect(sentBy('ops says, edited')).toEqual([ops.id]);
  });

  it('refuses a caller bound to another identity every bridge operation that does not declare it keeps to its identity: a walk over the contract', async () => {
    type Operation = { operationId?: string; security?: { bridgeToken?: unknown }[]; 'x-herald-policy'?: { speaks_as?: string } };
    const spec = JSON.parse(await readFile('generated/openapi.json', 'utf8')) as { security?: unknown[]; paths: Record<string, Record<string, Operation>> };
    // What an identity-bound agent needs at least: its sends and their states (declared `speaks_as: caller`).
    const keeping = Object.values(spec.paths).flatMap((ops) => Object.values(ops).filter((o) => o['x-herald-policy']?.speaks_as === 'caller').map((o) => o.operationId));
    expect(keeping).toEqual(expect.arrayContaining(['createDelivery', 'getDelivery', 'getCapabilities']));
    let walked = 0;
    for (const [route, ops] of Object.entries(spec.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (op.operationId === undefined || op['x-herald-policy']?.speaks_as === 'caller' || !((op.security ?? spec.security ?? []) as object[]).some((s) => 'bridgeToken' in s)) continue;
        const url = route.replace(/\{(\w+)\}/g, (_m, name: string) => (/request_id|^id$|sha256/.test(name) ? '1'.repeat(64) : '123456789012345678'));
        const r = await fetch(`${h.url}${url}`, { method: method.toUpperCase(), headers: { authorization: `Bearer ${h.bridgeToken}`, [POLICY_CLIENT_HEADER]: 'agent-ops', 'content-type': 'application/json' }, ...(method === 'get' || method === 'delete' ? {} : { body: '{}' }) });
        expect(r.status, `${method.toUpperCase()} ${route} (${op.operationId})`).toBe(403);
        expect(await r.json(), op.operationId).toEqual({ error: 'refused by policy: identity' });
        walked += 1;
      }
    }
    expect(walked).toBeGreaterThan(20);
  });

  it("holds each bot's gateway session under its own lease, says so in /readyz, and never logs a token", async () => {
    const ready = await waitFor(async () => {
      const r = await fetch(`${h.url}/readyz`);
      const body = (await r.json()) as { checks?: Record<string, string>; identities?: Record<string, Record<string, string>>; singletons?: Record<string, string> };
      return body.identities?.['ops']?.['gateway'] === 'ok' && body.checks?.['gateway'] === 'ok' ? body : undefined;
    }, 'both gateway sessions');
    expect(ready.singletons).toEqual({ 'discord:gateway': 'held', 'discord:gateway:ops': 'held' });
    expect(sandbox.gatewaySessions).toBe(2);
    const all = logged.join('');
    expect(all).toContain('"identity":"ops"');
    expect(all).not.toContain(ops.token);
    expect(all).not.toContain(h.env['DISCORD_TOKEN'] ?? 'unset');
  });

  /** The status page's platforms table: platform, speaking as, bot, link. */
  const platformRows = async (): Promise<string[][]> => {
    const html = await (await fetch(`${h.herald.metricsUrl ?? ''}/`)).text();
    const body = /<h2>platforms<\/h2>\n[\s\S]*?<tbody>\n([\s\S]*?)\n<\/tbody>/.exec(html)?.[1] ?? '';
    return [...body.matchAll(/<tr>(.*?)<\/tr>/g)].map((m) => [...(m[1] ?? '').matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((c) => c[1] ?? ''));
  };

  it('shows each bot on the status page: who it is, under the identity it speaks for, and its own gateway', async () => {
    const rows = await waitFor(async () => {
      const r = await platformRows();
      return r.length === 2 && r.every((x) => /^\d+$/.test(x[2] ?? '') && x[3] === 'gateway up') ? r : undefined;
    }, 'both bots and their gateways on the status page');
    expect(rows).toEqual([
      ['discord', 'default', sandbox.bot.id, 'gateway up'],
      ['discord', 'ops', ops.id, 'gateway up'],
    ]);
  });

  // Last: it revokes the ops bot's token for good.
  it("stops only its own identity when a bot's token is revoked: the other bot delivers, and the replica stays ready", async () => {
    sandbox.revokeBot(ops.token);
    const readyz = await waitFor(async () => {
      const r = await fetch(`${h.url}/readyz`);
      const body = (await r.json()) as { status: string; identities?: Record<string, Record<string, string>> };
      return body.identities?.['ops']?.['gateway'] !== 'ok' ? { status: r.status, body } : undefined;
    }, "the ops bot's gateway to go");
    expect(readyz.status).toBe(200);
    expect(readyz.body.status).toBe('ok');
    // The ops agent's post fails, and says why; nothing is sent as another bot.
    const refused = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(refused, 'ops after revocation'), as('agent-ops'));
    expect(await settled(refused, 'agent-ops')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    expect(sentBy('ops after revocation')).toEqual([]);
    // discord.js forgets a token Discord refused: the next posts fail at once too, not retried as
    // if Discord were unreachable; /readyz says why.
    const next = [newRequestId(), newRequestId()];
    const started = Date.now();
    for (const id of next) await h.bridge.post('/mcp/deliveries', post(id, `ops again ${id}`), as('agent-ops'));
    for (const id of next) expect(await settled(id, 'agent-ops')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    expect(Date.now() - started).toBeLessThan(5_000);
    const after = (await (await fetch(`${h.url}/readyz`)).json()) as { status: string; identities?: Record<string, Record<string, string>> };
    expect(after).toMatchObject({ status: 'ok', identities: { ops: { token: 'rejected by Discord (401)' } } });
    // The status page says so on the ops bot's row, and only there.
    const rows = await waitFor(async () => {
      const r = await platformRows();
      return r[1]?.[3]?.includes('token') === true ? r : undefined;
    }, "the ops bot's token trouble on the status page");
    expect(rows[1]?.slice(0, 2)).toEqual(['discord', 'ops']);
    expect(rows[1]?.[3]).toContain('token: rejected by Discord (401)');
    expect(rows[0]).toEqual(['discord', 'default', sandbox.bot.id, 'gateway up']);
    // The main agent's bot is untouched.
    const fine = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(fine, 'main after revocation'), as('agent-main'));
    expect(await settled(fine, 'agent-main')).toMatchObject({ state: 'delivered' });
    expect(sentBy('main after revocation')).toEqual([sandbox.bot.id]);
  });
});

describe('HERALD_DISCORD_IDENTITIES and the policy’s identity rule, checked at start', () => {
  const base = { HERALD_TRANSPORT: 'discord', DISCORD_TOKEN: 'a.b.c' };
  const problems = (env: Record<string, string>): string => {
    try {
      loadConfig({ ...base, ...env });
      return '';
    } catch (err) {
      return String((err as Error).message);
    }
  };

  it('names each wrong entry: the name, a reserved or repeated one, a missing or unreadable token', () => {
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'Ops=env:X' })).toContain('"Ops" is not an identity name');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'default=env:X', X: 't' })).toContain('"default" is the identity the platform\'s own variables configure');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X,ops=env:X', X: 't' })).toContain('names ops twice');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops' })).toContain('identity ops needs its bot token');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:MISSING' })).toContain('identity ops: MISSING is unset or empty');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=file:/nonexistent/token' })).toContain('identity ops: cannot read /nonexistent/token (ENOENT)');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=plain-token' })).toContain('its secret must be given as env:VARIABLE or file:/absolute/path');
    // The token itself is never part of a message.
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=plain-token' })).not.toContain('plain-token');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X', X: 'a.b.c' })).toContain('identity ops has the token of DISCORD_TOKEN: each identity is a bot of its own');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X,support=env:Y', X: 'same-secret', Y: 'same-secret' })).toContain('identity support has the token of identity ops');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X,support=env:Y', X: 'same-secret', Y: 'same-secret' })).not.toContain('same-secret');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X', X: 'secret-value' })).toBe('');
  });

  it('refuses a policy binding an agent to an identity no platform has, or a malformed one', () => {
    const known = { tools: ['post_message'], platforms: ['discord'], identities: ['ops'] };
    expect(() => parsePolicy('clients:\n  a: { identity: support }\n', 'p.yaml', known)).toThrow(/clients\.a\.identity: no platform has an identity called support \(the identities: default, ops\)/);
    expect(() => parsePolicy('connector:\n  identity: [ops]\n', 'p.yaml', known)).toThrow(/connector\.identity must be an identity's name/);
    expect(parsePolicy('connector:\n  identity: ops\n', 'p.yaml', known).connector.identity).toBe('ops');
  });

  it('speaks each platform as the identity asked for, and none that lacks it: nothing goes out as another bot', () => {
    const platform = (name: string, who: string): Platform => ({ name, title: who, idempotentSend: true, messageUrl: () => who, sender: { send: async () => ({ id: who }) } as unknown as NonNullable<Platform['sender']> });
    const discord = platform('discord', 'discord default');
    const slack = platform('slack', 'slack default');
    const opsBot = platform('discord', 'discord ops');
    const all = speakingAs(discord, [slack], new Map([['discord', new Map([['ops', opsBot]])]]));
    expect(all.as('default')).toBe(all);
    expect(all.as('ops')?.get('discord')).toBe(opsBot);
    expect(all.as('ops')?.get('slack')).toBeUndefined();
    expect(all.as('ops')?.all).toEqual([opsBot]);
    expect(all.as('support')).toBeUndefined();
    // Home without the identity: its name only, no facet to send through.
    const slackHome = speakingAs(slack, [discord], new Map([['discord', new Map([['ops', opsBot]])]]));
    const home = slackHome.as('ops')?.home;
    expect(home?.name).toBe('slack');
    expect(home?.sender).toBeUndefined();
    expect(slackHome.as('ops')?.get('slack')).toBeUndefined();
  });

  it('keeps a caller bound to another identity off the admin tier (the admin token sees every identity)', () => {
    const policy = new McpPolicy(parsePolicy('clients:\n  ops-agent: { identity: ops }\n  main-agent: { identity: default }\n', 'p.yaml', { tools: [], platforms: [] }));
    expect(policy.adminTier({ client: 'ops-agent' })).toBe(false);
    expect(policy.adminTier({ client: 'main-agent' })).toBe(true);
    expect(policy.adminTier({})).toBe(true);
  });
});
