import { WebClient } from '@slack/web-api';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandInvocation, InboundMessage } from '../src/platforms/platform.js';
import { SLACK_SANDBOX_IDS, SlackSandbox, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { SlackSocket } from '../src/platforms/slack/slack-socket.js';
import { waitFor } from './support/wait.js';

// From the attacking helper: Socket Mode tells its own workspace by comparing an envelope's team_id
// with auth.test's team. While auth.test did not answer (Slack's Web API failing while the socket
// stays up) the check said yes to every workspace: a person of the ops workspace ran Herald's
// commands (/agent pair) and, after one failed auth.test, fed the default bot's inbound. Now
// nothing is run or heard until Herald knows its workspace.

const definitions = [{ name: 'agent', description: 'Your agent', options: [{ type: 1, name: 'pair', description: 'Pair', options: [{ type: 3, name: 'code', description: 'The code', required: true }] }] }];

describe('attack: Socket Mode while auth.test fails', () => {
  let sandbox: SlackSandbox;
  let ops: OtherWorkspace;
  let socket: SlackSocket;
  const invocations: CommandInvocation[] = [];
  const seen: InboundMessage[] = [];

  beforeAll(async () => {
    sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1000, tierScale: 100 });
    ops = sandbox.addWorkspace('ops');
    await sandbox.start(0, '127.0.0.1');
    const client = new WebClient(sandbox.botToken, { slackApiUrl: sandbox.apiUrl, retryConfig: { retries: 0 } });
    socket = new SlackSocket({ appToken: sandbox.appToken, apiUrl: sandbox.apiUrl, log: pino({ level: 'silent' }), client });
    socket.onMessage((m) => seen.push(m));
    await socket.serve({ definitions, run: async (i) => (invocations.push(i), `ran ${i.subcommand ?? ''}`) });
  });
  afterAll(async () => {
    await socket?.close();
    await sandbox?.close();
  });

  it("runs no command of another workspace, even while Slack's auth.test is failing", async () => {
    // Slack's auth.test is unavailable (503) for the default bot token: Herald cannot tell whose workspace a command is from.
    sandbox.faults.clear();
    sandbox.faults.failNext('auth.test', 503, 50);
    expect(await sandbox.peopleOf('ops').slash(ops.ids.users.ada, ops.ids.channels.general, '/agent', 'pair 777777')).toEqual({ response_type: 'ephemeral', text: 'Herald is starting; try again in a moment.' });
    expect(await sandbox.slash(SLACK_SANDBOX_IDS.users.ada, SLACK_SANDBOX_IDS.channels.general, '/agent', 'pair 777777')).toEqual({ response_type: 'ephemeral', text: 'Herald is starting; try again in a moment.' });
    expect(invocations).toEqual([]);
    // Once Slack answers again, the default workspace's command runs and the other's is refused.
    sandbox.faults.clear();
    expect(await sandbox.slash(SLACK_SANDBOX_IDS.users.ada, SLACK_SANDBOX_IDS.channels.general, '/agent', 'pair 777777')).toEqual({ response_type: 'ephemeral', text: 'ran pair' });
    expect(await sandbox.peopleOf('ops').slash(ops.ids.users.ada, ops.ids.channels.general, '/agent', 'pair 777777')).toEqual({ response_type: 'ephemeral', text: 'Herald answers commands in its own workspace only.' });
    expect(invocations.filter((i) => i.guildId === ops.ids.team)).toEqual([]);
  });

  it("hears nothing written in another workspace, even while Slack's auth.test is failing", async () => {
    // A connection that does not know its workspace yet, and whose first auth.test fails (a single 503).
    const client = new WebClient(sandbox.botToken, { slackApiUrl: sandbox.apiUrl, retryConfig: { retries: 0 } });
    const fresh = new SlackSocket({ appToken: sandbox.appToken, apiUrl: sandbox.apiUrl, log: pino({ level: 'silent' }), client });
    const heard: InboundMessage[] = [];
    fresh.onMessage((m) => heard.push(m));
    try {
      await fresh.start();
      sandbox.faults.clear();
      sandbox.faults.failNext('auth.test', 503, 1);
      const asked = sandbox.calls('auth.test');
      sandbox.peopleOf('ops').say(ops.ids.users.bob, ops.ids.channels.general, 'ops workspace secret');
      await waitFor(() => sandbox.calls('auth.test') > asked, 'Herald to ask auth.test about the ops message');
      sandbox.faults.clear();
      const here = sandbox.say(SLACK_SANDBOX_IDS.users.bob, SLACK_SANDBOX_IDS.channels.general, 'default workspace line');
      await waitFor(() => heard.find((m) => m.content === 'default workspace line' && m.messageId === here), 'the default workspace message');
      expect(heard.filter((m) => m.channelId === ops.ids.channels.general || m.guildId === ops.ids.team || m.content === 'ops workspace secret')).toEqual([]);
    } finally {
      await fresh.close();
    }
  });
});
