import { WebClient } from '@slack/web-api';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandSurface } from '../src/platforms/plugin.js';
import { SLACK_SANDBOX_IDS, SlackSandbox, workspaceIds } from '../src/platforms/slack/sandbox/sandbox.js';
import { invocationOf } from '../src/platforms/slack/slack-socket-commands.js';
import { SlackSocket } from '../src/platforms/slack/slack-socket.js';
import type { CommandInvocation, InboundMessage } from '../src/platforms/platform.js';
import { waitFor } from './support/wait.js';

const { channels, users, team, bot } = SLACK_SANDBOX_IDS;

/** Herald's command definitions as the router gives them (Discord-shaped): subcommands with options. */
const definitions: CommandSurface['definitions'] = [
  {
    name: 'agent',
    description: 'Your agent',
    options: [
      { type: 1, name: 'pair', description: 'Pair', options: [{ type: 3, name: 'code', description: 'The code', required: true }] },
      { type: 1, name: 'register', description: 'Register' },
      {
        type: 1,
        name: 'note',
        description: 'Leave a note in a channel',
        options: [
          { type: 7, name: 'channel', description: 'Where' },
          { type: 3, name: 'text', description: 'What' },
        ],
      },
    ],
  },
  { name: 'ping', description: 'Ping', options: [{ type: 3, name: 'target', description: 'Who' }] },
];

/** Slash commands and message events over Socket Mode, against the Slack sandbox with Slack's own clients. */
describe('SlackSocket against the Slack sandbox', () => {
  let sandbox: SlackSandbox;
  let client: WebClient;
  let socket: SlackSocket;
  const invocations: CommandInvocation[] = [];
  let slow = false;
  let slowAnswered = 0;

  beforeAll(async () => {
    sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1000, tierScale: 100 });
    // The app is in a second workspace too (another identity's, HERALD_SLACK_IDENTITIES): its one connection hears both.
    sandbox.addWorkspace('ops');
    await sandbox.start();
    client = new WebClient(sandbox.botToken, { slackApiUrl: sandbox.apiUrl, retryConfig: { retries: 0 } });
    socket = new SlackSocket({ appToken: sandbox.appToken, apiUrl: sandbox.apiUrl, log: pino({ level: 'silent' }), client });
    await socket.serve({
      definitions,
      run: async (i) => {
        invocations.push(i);
        // A handler slower than Slack's 3 s ack window (the surface must not wait for it).
        if (slow) {
          await new Promise((r) => setTimeout(r, 2_800));
          slowAnswered++;
        }
        return `${i.subcommand ?? '-'}: ${i.option('code') ?? i.option('text') ?? ''}`;
      },
    });
  });
  afterAll(async () => {
    await socket?.close();
    await sandbox?.close();
  });

  it('connects over Socket Mode', () => {
    expect(socket.up).toBe(true);
    expect(sandbox.connected()).toBe(true);
  });

  it('/agent pair 123456 reaches the handler as subcommand pair with option code, and the ack is its private answer', async () => {
    const ack = await sandbox.slash(users.ada, channels.general, '/agent', 'pair 123456');
    expect(ack).toEqual({ response_type: 'ephemeral', text: 'pair: 123456' });
    const i = invocations.at(-1);
    expect(i).toMatchObject({ name: 'agent', subcommand: 'pair', guildId: team, channelId: channels.general, user: { id: users.ada, username: 'ada', globalName: null } });
    expect(i?.option('code')).toBe('123456');
    expect(i?.option('text')).toBeNull();
    // Ada is the workspace's admin; Bob is not.
    expect(i?.canManageGuild).toBe(true);
    await sandbox.slash(users.bob, channels.general, '/agent', 'register');
    expect(invocations.at(-1)).toMatchObject({ subcommand: 'register', canManageGuild: false, user: { id: users.bob } });
  });

  it('a handler slower than the ack window is acked at once with a holding line, and its answer follows through response_url', async () => {
    slow = true;
    try {
      const ack = await sandbox.slash(users.ada, channels.general, '/agent', 'pair 654321');
      expect(ack).toEqual({ response_type: 'ephemeral', text: 'Working on it…' });
      // The handler's answer follows through the command's response_url, privately too.
      const late = await waitFor(() => sandbox.commandReplies().find((r) => r.text === 'pair: 654321'), 'the late answer through response_url', 10_000);
      expect(late).toMatchObject({ user: users.ada, channel: channels.general, response_type: 'ephemeral' });
      expect(slowAnswered).toBe(1);
    } finally {
      slow = false;
    }
  });

  it('reads options positionally: the last takes the rest of the line; a channel reference gives its id', () => {
    const note = invocationOf({ command: '/agent', text: `note <#${channels.alerts}|alerts> deploy is done`, user_id: users.bob, team_id: team }, definitions, false);
    expect(note.subcommand).toBe('note');
    expect(note.option('channel')).toBe(channels.alerts);
    expect(note.option('text')).toBe('deploy is done');
    const ping = invocationOf({ command: '/ping', text: '  bob  ' }, definitions, false);
    expect(ping.subcommand).toBeNull();
    expect(ping.option('target')).toBe('bob');
    const bare = invocationOf({ command: '/agent', text: '' }, definitions, false);
    expect(bare.subcommand).toBeNull();
  });

  it('reconnects when Slack asks it to, and answers commands again', async () => {
    const opened = sandbox.calls('apps.connections.open');
    sandbox.refreshConnections();
    await waitFor(() => sandbox.calls('apps.connections.open') > opened && socket.up && sandbox.connected(), 'a new connection', 15_000);
    expect(await sandbox.slash(users.bob, channels.general, '/agent', 'pair 42')).toEqual({ response_type: 'ephemeral', text: 'pair: 42' });
  });

  it("a person's message reaches onMessage; Herald's own posts do not", async () => {
    const seen: InboundMessage[] = [];
    const off = socket.onMessage((m) => seen.push(m));
    try {
      await client.chat.postMessage({ channel: channels.general, text: 'from herald itself', username: 'some-agent' });
      const ts = sandbox.say(users.bob, channels.general, 'hello <@U0HERALDBOT>');
      const got = await waitFor(() => seen.find((m) => m.messageId === ts), 'the message event');
      expect(got).toMatchObject({ channelId: channels.general, authorId: users.bob, authorIsBot: false, guildId: team, content: 'hello <@U0HERALDBOT>' });
      expect(got.createdAt.getTime()).toBe(Math.floor(Number(ts) * 1000));
      expect(seen.filter((m) => m.authorId === bot.user || m.content === 'from herald itself')).toEqual([]);
    } finally {
      off();
    }
  });

  it("hears and answers the bot token's workspace only: another workspace's messages are not heard, its commands not run", async () => {
    const seen: InboundMessage[] = [];
    const off = socket.onMessage((m) => seen.push(m));
    try {
      const ops = sandbox.peopleOf('ops');
      const two = workspaceIds(2, 'ops');
      const before = invocations.length;
      expect(await ops.slash(two.users.ada, two.channels.general, '/agent', 'pair 777777')).toEqual({ response_type: 'ephemeral', text: 'Herald answers commands in its own workspace only.' });
      expect(invocations.length).toBe(before);
      const there = ops.say(two.users.bob, two.channels.general, 'hello <@U0HERALDB02> from ops');
      const inDm = ops.say(two.users.bob, two.bot.user, 'a DM in the ops workspace');
      // What is written in the default workspace afterwards arrives; what came before it from the other never does.
      const here = sandbox.say(users.bob, channels.general, 'after the ops workspace');
      await waitFor(() => seen.find((m) => m.messageId === here), 'the default workspace message');
      // By where and what, not by ts alone: each workspace gives its own, and two may be equal.
      expect(seen.filter((m) => m.guildId === two.team || m.channelId === two.channels.general || m.content === 'hello <@U0HERALDB02> from ops' || m.content === 'a DM in the ops workspace')).toEqual([]);
      expect([there, inDm].every((ts) => ts !== '')).toBe(true);
      expect(await sandbox.slash(users.bob, channels.general, '/agent', 'pair 42')).toEqual({ response_type: 'ephemeral', text: 'pair: 42' });
    } finally {
      off();
    }
  });

  it('close() disconnects and leaves nothing open', async () => {
    await socket.close();
    expect(socket.up).toBe(false);
    await waitFor(() => !sandbox.connected(), 'the sandbox to see the app gone');
    await expect(sandbox.slash(users.ada, channels.general, '/agent', 'pair 1')).rejects.toThrow();
  });

  it('a slash command before the commands are served is told to come back; a refused app token fails start at once', async () => {
    const early = new SlackSocket({ appToken: sandbox.appToken, apiUrl: sandbox.apiUrl, log: pino({ level: 'silent' }) });
    try {
      await early.start();
      expect(await sandbox.slash(users.bob, channels.general, '/agent', 'register')).toEqual({ response_type: 'ephemeral', text: 'Herald is starting; try again in a moment.' });
    } finally {
      await early.close();
    }
    const refused = new SlackSocket({ appToken: 'xapp-1-not-this-one', apiUrl: sandbox.apiUrl, log: pino({ level: 'silent' }) });
    await expect(refused.start()).rejects.toThrow(/invalid_auth/);
    expect(refused.up).toBe(false);
    await refused.close();
    await waitFor(() => !sandbox.connected(), 'no app connected');
  });
});
