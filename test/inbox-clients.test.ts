import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * The inbox per reader, black-box over HTTP (every answer checked against the contract): with the
 * operator's policy, each OAuth client `herald mcp --http` names in x-herald-policy-client reads
 * with a cursor of its own and sees what its rules allow; a `read` client does not see DMs; the
 * connector's answers stay as they were.
 */
describe('the inbox per reader', () => {
  let sandbox: DiscordSandbox;
  let h: TestHerald;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-inbox-clients-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, ['clients:', '  reader: { read_only: true }', '  alerts-only: { destinations: [alerts] }', '  dm-helper: { tools: [send_dm, list_inbox, wait_for_messages, ack_inbox] }', ''].join('\n'));
    sandbox = await new DiscordSandbox().start();
    h = await startTestHerald({ useSandbox: sandbox, env: { HERALD_POLICY: policy } });
    await waitFor(() => sandbox.gatewaySessions === 1 && sandbox.commands.length > 0, 'Herald on the gateway', 60_000);
    await h.mapDestination('alerts', IDS.channels.alerts);
    await h.mapDestination('ops', IDS.channels.ops);
  }, 90_000);
  afterAll(async () => {
    await h?.close();
    await sandbox?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const write = async (body: Record<string, unknown>): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const as = (client: string | undefined) => ({ headers: client === undefined ? {} : { [POLICY_CLIENT_HEADER]: client } });
  const page = async (client: string | undefined, after?: string) => {
    const res = await h.bridge.get(`/mcp/inbox?limit=100${after !== undefined ? `&after=${after}` : ''}`, as(client));
    expect(res.status).toBe(200);
    return res.json as { items: { id: string; message_id: string; kind: string }[]; cursor: string };
  };

  it('each client sees what its rules allow, DMs only the connector and a client granted send_dm; each moves its own cursor', async () => {
    expect((await sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand: 'register' })).data?.content).toContain('Registered');
    // Each written once the one before is stored: a DM and a channel message reach the inbox by
    // different paths, so two written at once may be stored in either order.
    const stored = async (body: Record<string, unknown>, count: number): Promise<string> => {
      const id = await write(body);
      await waitFor(async () => (await page(undefined, '0')).items.length >= count, `event ${count} stored`, 20_000);
      return id;
    };
    const dm = await stored({ userId: IDS.user, dm: true, content: 'my private question' }, 1);
    const alerts = await stored({ userId: IDS.user, channelId: IDS.channels.alerts, content: `<@${sandbox.bot.id}> disk full` }, 2);
    const ops = await stored({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> deploy stuck` }, 3);
    const ids = async (client: string | undefined) => (await page(client, '0')).items.map((e) => e.message_id);

    expect(await ids(undefined)).toEqual([dm, alerts, ops]);
    expect(await ids('reader')).toEqual([alerts, ops]);
    expect(await ids('alerts-only')).toEqual([alerts]);
    expect(await ids('dm-helper')).toEqual([dm, alerts, ops]);
    // The wait sees what the list sees.
    const next = await h.bridge.get('/mcp/inbox/next?after=0&timeout_ms=0', as('reader'));
    expect((next.json as { event: { message_id: string } }).event.message_id).toBe(alerts);

    // A read-only client may not move a cursor; alerts-only moves its own, the connector's stays.
    const newest = (await page(undefined, '0')).items.at(-1)?.id ?? '0';
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: newest }, as('reader'))).status).toBe(403);
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: newest }, as('alerts-only'))).json).toEqual({ cursor: newest });
    expect((await page('alerts-only')).cursor).toBe(newest);
    expect((await page('alerts-only')).items).toEqual([]);
    expect((await page(undefined)).cursor).toBe('0');
    expect((await page(undefined)).items.map((e) => e.message_id)).toEqual([dm, alerts, ops]);
    expect((await page('dm-helper')).cursor).toBe('0');
  }, 60_000);
});
