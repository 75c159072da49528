import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import type { CommandInvocation } from '../src/platforms/commands.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import type { RunningPlatform, Surfaces } from '../src/platforms/plugin.js';
import { storableRunning } from '../src/platforms/storable-inbound.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * Platform events cannot be answered with a 400: what PostgreSQL would refuse (U+0000, a lone
 * surrogate) is made storable once, where every platform's inbound events enter
 * (src/platforms/storable-inbound.ts), and the event is kept. A person mentions the bot with both
 * in the text, and one whose display name holds U+0000 writes; the agent reads each event from /mcp/inbox with U+0000 dropped and the surrogate
 * replaced by U+FFFD, and the inbox keeps working for the next one.
 */
const ODD = '123456789012345698';

describe('inbound platform events are made storable where they enter', () => {
  let sandbox: DiscordSandbox;
  let h: TestHerald;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    // A person whose display name holds U+0000 (the inbox's author_name is text, which refuses it).
    sandbox.addUser({ id: ODD, username: 'odd', global_name: 'O\u0000dd \ud800', bot: false });
    h = await startTestHerald({ useSandbox: sandbox });
    await waitFor(() => sandbox.gatewaySessions === 1, 'Herald on the gateway');
    // A mention is heard only where a destination maps the channel.
    await h.mapDestination('ops', IDS.channels.ops);
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await sandbox?.close();
  });

  const write = async (content: string, userId: string = IDS.user): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId, channelId: IDS.channels.ops, content }) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const heard = (messageId: string) =>
    waitFor(async () => {
      const res = await h.bridge.get('/mcp/inbox?after=0&limit=100');
      return (res.json as { items: { message_id: string; content: string; author: { name: string | null } }[] }).items.find((e) => e.message_id === messageId);
    }, `message ${messageId} in the inbox`, 10_000);

  it('a mention holding U+0000 and lone surrogates is stored with them made storable, and the next one is stored too', async () => {
    const bad = await write(`<@${sandbox.bot.id}> a\u0000b \ud800c d\udc00`);
    expect((await heard(bad)).content).toBe(`<@${sandbox.bot.id}> ab \ufffdc d\ufffd`);
    // The event of a person whose name the store would refuse is kept (it was lost: the insert failed).
    const named = await heard(await write(`<@${sandbox.bot.id}> hello`, ODD));
    expect(named.author.name).toBe('Odd \ufffd');
    const next = await write(`<@${sandbox.bot.id}> fine`);
    expect((await heard(next)).content).toBe(`<@${sandbox.bot.id}> fine`);
  });
});

describe('command invocations are made storable where they enter', () => {
  it("a platform's command surface hands the modules names and options without U+0000 or lone surrogates", async () => {
    const seen: CommandInvocation[] = [];
    let surface: Partial<Surfaces> = {};
    const started: RunningPlatform = { facets: new MemoryPlatform(), readiness: () => ({}), serve: async (s) => void (surface = s), close: async () => undefined };
    await storableRunning(started).serve?.({ commands: { definitions: [], run: async (invocation) => (seen.push(invocation), 'ok') } });
    const odd: CommandInvocation = { user: { id: '1', username: 'o\u0000dd', globalName: 'O\ud800' }, guildId: null, channelId: null, name: 'agent', subcommand: 'register', option: () => 'x\u0000\udc00y', canManageGuild: false };
    expect(await surface.commands?.run(odd)).toBe('ok');
    expect([seen[0]?.user, seen[0]?.option('any')]).toEqual([{ id: '1', username: 'odd', globalName: 'O\ufffd' }, 'x\ufffdy']);
  });
});
