import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { connectGateway } from '../src/platforms/discord/gateway-client.js';
import { waitFor } from './support/wait.js';

/**
 * A gateway connect that fails after login (the slash commands cannot be registered) leaves no
 * session behind: the discord.js client is destroyed on every failure path, so a replica that
 * then loses the lease never keeps a second session beside the holder's.
 */
describe('a gateway connect that fails after login', () => {
  let sandbox: DiscordSandbox;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
  }, 30_000);
  afterAll(async () => {
    await sandbox?.close();
  });

  it('destroys the client it logged in with', async () => {
    sandbox.inject({ method: 'PUT', path: '/commands$', action: 'error', status: 403, code: 50001, times: 1 });
    const connecting = connectGateway({
      token: sandbox.botToken,
      apiUrl: sandbox.apiUrl,
      commands: { definitions: [], run: async () => '' },
      log: pino({ level: 'silent' }),
    });
    await expect(connecting).rejects.toThrow();
    // Before: the session stayed identified, with nothing left to close it.
    await waitFor(() => sandbox.gatewaySessions === 0, 'the session to end', 5_000);
    expect(sandbox.gatewaySessions).toBe(0);
  }, 30_000);
});
