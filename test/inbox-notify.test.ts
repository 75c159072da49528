import { LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { callTool, mcpOverStdio } from './support/mcp.js';
import { waitFor } from './support/wait.js';

/**
 * `herald mcp` with HERALD_MCP_INBOX_NOTIFY=on: for clients that act on notifications, each new
 * inbox event reaches the session as a log message naming it (never its content); the agent
 * then reads it with the inbox tools. Off (the default), a session hears nothing.
 */
describe('herald mcp: inbox notifications', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let stateDir: string;
  let notified: Client;
  let quiet: Client;
  const heard: LoggingMessageNotification['params'][] = [];
  const quietHeard: LoggingMessageNotification['params'][] = [];

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.gatewaySessions === 1 && h.sandbox.commands.length > 0, 'Herald on the gateway', 120_000);
    // A mention is heard only where a destination maps the channel.
    await h.mapDestination('ops', IDS.channels.ops);
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-inbox-notify-'));
    const env = { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(stateDir, 'state.json') };
    notified = await mcpOverStdio('notified', { ...env, HERALD_MCP_INBOX_NOTIFY: 'on' });
    notified.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      heard.push(n.params);
    });
    quiet = await mcpOverStdio('quiet', { ...env, HERALD_MCP_STATE: path.join(stateDir, 'quiet.json') });
    quiet.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      quietHeard.push(n.params);
    });
  }, 240_000);
  afterAll(async () => {
    await notified?.close();
    await quiet?.close();
    await h?.close();
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
  });

  it('a mention of the bot is notified once, by id and kind, without its content; the tools read it', async () => {
    const secret = 'the launch code is 4417';
    const res = await fetch(`${h.sandbox.url}/sandbox/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${h.sandbox.bot.id}> ${secret}` }),
    });
    expect(res.status).toBe(200);
    const messageId = ((await res.json()) as { id: string }).id;
    const note = await waitFor(() => heard.find((n) => n.logger === 'herald.inbox'), 'an inbox notification', 30_000);
    expect(note.level).toBe('notice');
    expect(note.data).toMatchObject({ kind: 'mention', platform: 'discord', channel_id: IDS.channels.ops, author: IDS.user });
    expect(JSON.stringify(note)).not.toContain(secret);
    const listed = await callTool(notified, 'list_inbox', {});
    const items = (listed.json as { items: { id: string; message_id: string; content: string }[] }).items;
    const event = items.find((e) => e.message_id === messageId);
    expect(event?.id).toBe((note.data as { inbox_event: string }).inbox_event);
    expect(event?.content).toContain(secret);
    // Once: another event is notified after it, never the same one again.
    const second = await fetch(`${h.sandbox.url}/sandbox/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${h.sandbox.bot.id}> and another` }),
    });
    expect(second.status).toBe(200);
    await waitFor(() => heard.filter((n) => n.logger === 'herald.inbox').length >= 2, 'a second notification', 30_000);
    const ids = heard.filter((n) => n.logger === 'herald.inbox').map((n) => (n.data as { inbox_event: string }).inbox_event);
    expect(new Set(ids).size).toBe(ids.length);
    // The session without the setting heard nothing.
    expect(quietHeard.filter((n) => n.logger === 'herald.inbox')).toEqual([]);
  });
});
