import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { POLICY_CLIENT_HEADER } from '../../src/infra/http/policy.middleware.js';
import { DiscordSandbox } from '../../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './herald.js';
import { settledAs, waitFor } from './wait.js';

/**
 * A Herald that is two Discord bots in one sandbox (docs/guides/identities.md): Herald's own
 * (`default`) and `herald-ops` (the identity `ops`, HERALD_DISCORD_IDENTITIES), with the operator's
 * policy `policy` binding agents to them, #alerts mapped, and both bots' commands registered.
 */
export interface TwoBots {
  h: TestHerald;
  sandbox: DiscordSandbox;
  /** The ops bot's user id and token. */
  ops: { id: string; token: string };
  /** Request options naming the OAuth client `client` (the header `herald mcp` sets for each client). */
  as(client: string): { headers: Record<string, string> };
  /** A delivery's state once final (delivered, failed or unknown), as `client` sees it. */
  settled(requestId: string, client: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startTwoBots(policy: string, options: { env?: Record<string, string>; logTo?: NodeJS.WritableStream } = {}): Promise<TwoBots> {
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-two-bots-'));
  let sandbox: DiscordSandbox | undefined;
  let h: TestHerald | undefined;
  const close = async (): Promise<void> => {
    await h?.close();
    await sandbox?.close();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const file = path.join(dir, 'policy.yaml');
    await writeFile(file, policy);
    sandbox = await new DiscordSandbox().start();
    const bot = sandbox.addBot('herald-ops');
    const ops = { id: bot.user.id, token: bot.token };
    h = await startTestHerald({
      useSandbox: sandbox,
      ...(options.logTo !== undefined ? { logTo: options.logTo } : {}),
      env: { HERALD_POLICY: file, HERALD_DISCORD_IDENTITIES: 'ops=env:OPS_BOT_TOKEN', OPS_BOT_TOKEN: ops.token, ...options.env },
    });
    await h.mapDestination('alerts', IDS.channels.alerts);
    const s = sandbox;
    await waitFor(() => (s.commands.length > 0 && s.commandsOf(ops.id).length > 0) || undefined, 'both bots’ commands');
    const herald = h;
    const as = (client: string) => ({ headers: { [POLICY_CLIENT_HEADER]: client } });
    return {
      h: herald,
      sandbox: s,
      ops,
      as,
      settled: (requestId, client, timeoutMs) => settledAs(herald.bridge, requestId, client, timeoutMs),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
