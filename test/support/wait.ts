import { POLICY_CLIENT_HEADER } from '../../src/infra/http/policy.middleware.js';
import type { Client } from './client.js';

/** Poll until `probe` returns a value that is not undefined/false, or fail after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Poll a resource with a `state` (a delivery, a handoff, an operator's view of a delivery) through
 * `api` until its state is `state` (or one of them), every answer checked against the contract;
 * resolves with that answer. On timeout the error says the last answer seen.
 */
export async function waitForStateAt(api: Pick<Client, 'get'>, path: string, state: string | readonly string[], what: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
  const wanted: readonly string[] = typeof state === 'string' ? [state] : state;
  let last: unknown;
  try {
    return await waitFor(async () => {
      last = (await api.get(path)).json;
      const answer = last as Record<string, unknown>;
      return wanted.includes(String(answer['state'])) ? answer : undefined;
    }, what, timeoutMs);
  } catch (err) {
    throw new Error(`${String(err)}; last seen ${JSON.stringify(last)}`);
  }
}

/** Wait for a delivery (GET /mcp/deliveries/{requestId}) to reach `state`; see waitForStateAt. */
export function waitForDelivery(api: Pick<Client, 'get'>, requestId: string, state: string | readonly string[], what?: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
  const wanted = typeof state === 'string' ? state : state.join(' or ');
  return waitForStateAt(api, `/mcp/deliveries/${requestId}`, state, what ?? `${requestId.slice(0, 8)}… to be ${wanted}`, timeoutMs);
}

/**
 * Wait for a delivery to settle (delivered, failed or unknown), read by the agent `client` names
 * (the policy's x-herald-policy-client header: another agent's deliveries are not its to see).
 */
export function settledAs(bridge: Pick<Client, 'get'>, requestId: string, client: string, timeoutMs?: number): Promise<Record<string, unknown>> {
  return waitFor(
    async () => {
      const r = await bridge.get(`/mcp/deliveries/${requestId}`, { headers: { [POLICY_CLIENT_HEADER]: client } });
      const state = r.json as Record<string, unknown>;
      return r.status === 200 && ['delivered', 'failed', 'unknown'].includes(String(state['state'])) ? state : undefined;
    },
    `${requestId.slice(0, 8)} from ${client} to settle`,
    timeoutMs,
  );
}
