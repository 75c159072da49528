import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { identityFor, parsePolicy } from '../src/infra/policy/policy.js';
import { McpPolicy } from '../src/mcp/policy.js';
import { checkToken } from '../src/platforms/discord/discord.plugin.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import type { DiscordConfig } from '../src/platforms/discord/settings.js';
import pino from 'pino';
import { startTestHerald } from './support/herald.js';

// Attacks on HERALD_DISCORD_IDENTITIES and the policy's identity rule: what start-up lets through.
const base = { HERALD_TRANSPORT: 'discord', DISCORD_TOKEN: 'main.bot.token' };
const problems = (env: Record<string, string>): string => {
  try {
    loadConfig({ ...base, ...env });
    return '';
  } catch (err) {
    return String((err as Error).message);
  }
};
const identities = (env: Record<string, string>) => (loadConfig({ ...base, ...env }).platforms['discord'] as { identities: { name: string; token: string | undefined }[] }).identities;

describe('attack: identity names and token sources at start', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack-identities-cfg-'));
  });
  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('held: names at the bounds (32 ok, 33 not), unicode, upper case and "default" are refused, in the env and in the policy', () => {
    const n32 = `a${'b'.repeat(31)}`;
    expect(problems({ HERALD_DISCORD_IDENTITIES: `${n32}=env:X`, X: 'other' })).toBe('');
    expect(problems({ HERALD_DISCORD_IDENTITIES: `${n32}c=env:X`, X: 'other' })).toContain('is not an identity name');
    for (const bad of ['öps', 'ops\u200b', 'Ops', '1ops', '-ops', 'default']) expect(problems({ HERALD_DISCORD_IDENTITIES: `${bad}=env:X`, X: 'other' }), bad).not.toBe('');
    const known = { tools: [], platforms: ['discord'], identities: [n32] };
    expect(parsePolicy(`clients:\n  a: { identity: ${n32} }\n`, 'p.yaml', known).clients.get('a')?.identity).toBe(n32);
    expect(parsePolicy('clients:\n  a: { identity: default }\n', 'p.yaml', known).clients.get('a')?.identity).toBe('default');
    for (const bad of [`${n32}c`, '"öps"', '123', 'null', '[ops]']) expect(() => parsePolicy(`clients:\n  a: { identity: ${bad} }\n`, 'p.yaml', known), bad).toThrow(/identity/);
  });

  it("held: a token file's trailing newline or CRLF is trimmed, a path may hold '=', spaces around entries are dropped", async () => {
    const crlf = path.join(dir, 'crlf');
    await writeFile(crlf, 'ops-secret\r\n');
    const eq = path.join(dir, 'a=b');
    await writeFile(eq, 'support-secret\n');
    expect(identities({ HERALD_DISCORD_IDENTITIES: ` ops=file:${crlf} , support=file:${eq} ` })).toEqual([
      { name: 'ops', token: 'ops-secret' },
      { name: 'support', token: 'support-secret' },
    ]);
    // The file's token equal to DISCORD_TOKEN once trimmed: caught.
    const same = path.join(dir, 'same');
    await writeFile(same, `${base.DISCORD_TOKEN}\n`);
    expect(problems({ HERALD_DISCORD_IDENTITIES: `ops=file:${same}` })).toContain('has the token of DISCORD_TOKEN');
  });

  it("refuses the same bot's token under two names, however it is padded (an env variable's token is trimmed, as a file's)", () => {
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X', X: `${base.DISCORD_TOKEN} ` })).toContain('has the token of DISCORD_TOKEN');
    expect(problems({ HERALD_DISCORD_IDENTITIES: 'ops=env:X,support=env:Y', X: 'same-secret', Y: '\tsame-secret' })).toContain('has the token of identity ops');
  });

  it('held (fail closed): with the connector bound to ops, no odd x-herald-policy-client value reaches the default identity; only a client the policy binds to default does', () => {
    const policy = parsePolicy('connector:\n  identity: ops\nclients:\n  agent-main: { identity: default }\n  agent-ops: {}\n', 'p.yaml', { tools: [], platforms: [], identities: ['ops'] });
    // Absent or empty (identityOf maps '' to undefined), another case, a joined duplicate header, a long id: the connector's.
    for (const client of [undefined, 'AGENT-MAIN', 'agent-main, agent-ops', 'agent-ops, agent-main', ' agent-main', 'x'.repeat(5000), '__proto__', 'constructor']) expect(identityFor(policy, client), String(client).slice(0, 30)).toBe('ops');
    // A client named without an identity keeps the connector's.
    expect(identityFor(policy, 'agent-ops')).toBe('ops');
    // By design (the header is trusted from the bridge token only), a client bound to default overrides the connector's binding.
    expect(identityFor(policy, 'agent-main')).toBe('default');
    // herald mcp keeps even that client off its admin tier (the connector's binding counts there): fail closed.
    expect(new McpPolicy(policy).adminTier({ client: 'agent-main' })).toBe(false);
  });
});

describe('the same Discord bot under two names: start-up asks Discord whose each token is', () => {
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it('refuses two tokens of one bot (Discord answers the same user id for both), naming the identities, never a token', async () => {
    // A second token the sandbox knows for Herald's own bot: two strings, one bot.
    const second = `${sandbox.botToken}-second`;
    (sandbox as unknown as { botTokens: Map<string, unknown> }).botTokens.set(second, sandbox.bot);
    const config = loadConfig({ HERALD_TRANSPORT: 'discord', DISCORD_TOKEN: sandbox.botToken, DISCORD_API_URL: sandbox.apiUrl, HERALD_DISCORD_IDENTITIES: 'ops=env:X', X: second }).platforms['discord'] as DiscordConfig;
    const error = await checkToken(config, pino({ level: 'silent' })).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toBe(`identity ops and DISCORD_TOKEN are the same Discord bot (user ${sandbox.bot.id}): each identity of HERALD_DISCORD_IDENTITIES is a bot of its own`);
    expect(error?.message).not.toContain(second);
    // Two bots of their own pass.
    const ops = sandbox.addBot('herald-ops');
    const fine = loadConfig({ HERALD_TRANSPORT: 'discord', DISCORD_TOKEN: sandbox.botToken, DISCORD_API_URL: sandbox.apiUrl, HERALD_DISCORD_IDENTITIES: 'ops=env:X', X: ops.token }).platforms['discord'] as DiscordConfig;
    await expect(checkToken(fine, pino({ level: 'silent' }))).resolves.toBeUndefined();
  });
});

describe("held: an identity's token Discord rejects stops start-up without the token in the error or the log", { timeout: 120_000 }, () => {
  it('names the identity, never the token', async () => {
    const sandbox = await new DiscordSandbox().start();
    const logged: string[] = [];
    const logTo = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(chunk.toString('utf8'));
        done();
      },
    });
    const bogus = 'sandbox.THIS-IS-A-REVOKED-OPS-TOKEN-0123456789';
    try {
      const started = startTestHerald({ useSandbox: sandbox, logTo, env: { LOG_LEVEL: 'debug', HERALD_DISCORD_IDENTITIES: 'ops=env:OPS_BOT_TOKEN', OPS_BOT_TOKEN: bogus } });
      const err = await started.then(
        async (h) => {
          await h.close();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).toContain("identity ops's token (HERALD_DISCORD_IDENTITIES)");
      expect(err?.message).not.toContain(bogus);
      expect(String((err as { cause?: Error } | undefined)?.cause?.message)).not.toContain(bogus);
      expect(logged.join('')).toContain('Discord rejected identity ops');
      expect(logged.join('')).not.toContain(bogus);
      expect(logged.join('')).not.toContain(sandbox.botToken);
    } finally {
      await sandbox.close();
    }
  });
});
