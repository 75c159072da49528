import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config-types.js';
import { contractWith, readContract, type Contract } from '../infra/contract/spec.js';
import type { Store } from '../infra/db/database.js';
import { NotFoundError } from '../infra/errors.js';
import { createApi } from '../infra/http/api.js';
import { HttpMetrics } from '../infra/http/http.metrics.js';
import { policyCheck, type OriginalOf } from '../infra/http/policy.middleware.js';
import { probeOperations } from '../infra/http/probes.js';
import { closeServer, serveHttp } from '../infra/http/server.js';
import type { Registry } from '../infra/metrics.js';
import { confirmKey } from '../infra/policy/confirm.js';
import { NO_POLICY, type Policy } from '../infra/policy/policy.js';
import type { ApiPage, HeraldModule, ModuleParts } from './contract.js';
import { deliveriesModule } from './deliveries/index.js';
import type { StartedModules } from './runner.js';

// The one HTTP API of the started modules: the contract they serve (the bundle and their own
// documents), the operator's policy on every operation, the probes, and their routes outside it.

/** The contract the modules serve: the bundle (generated/openapi.json) with each one's own `contract` file merged in. */

export function contractOf(modules: readonly HeraldModule[]): Contract {
  return contractWith(modules.flatMap((m) => (m.contract === undefined ? [] : [{ owner: m.name, document: readContract(m.contract) }])));
}

export interface ApiServing {
  readonly url: string;
  /** The pages an operator opens, linked from the status page on the metrics port. */
  readonly api: { host: string; port: number; pages: ApiPage[] };
  /** Stop serving: end what would hold the server open, then stop accepting requests. */
  close(): Promise<void>;
}

/** Serve the modules' operations (and the probes) on PORT, held by the operator's policy. */
export async function serveApi(o: {
  config: Config;
  log: Logger;
  registry: Registry;
  store: Store;
  policy: Policy | undefined;
  contract: Contract;
  modules: StartedModules;
  probes: Parameters<typeof probeOperations>;
  /** The started platforms' own routes (src/platforms/plugin.ts `routes`). */
  platformRoutes?: readonly Router[];
}): Promise<ApiServing> {
  const { config, log, registry, modules } = o;
  const parts: readonly ModuleParts<unknown>[] = modules.parts;
  const httpMetrics = new HttpMetrics(registry);
  const middleware = await createApi({
    bridgeToken: config.bridgeToken,
    adminToken: config.adminToken,
    log,
    contract: o.contract,
    onAuthFailure: (area, throttled) => httpMetrics.authFailure(area, throttled),
    // Held on every bridge call, with or without a policy file (an OAuth client's upload cap has a default).
    policy: policyCheck({
      policy: o.policy ?? NO_POLICY,
      db: o.store.db as Kysely<unknown>,
      registry,
      confirmKey: confirmKey(config.bridgeToken ?? ''),
      defaults: { chat: config.chatTransport },
      originalOf: originalDelivery(modules.use(deliveriesModule).deliveries),
    }),
    operations: [...parts.flatMap((p) => p.operations ?? []), probeOperations(...o.probes)],
  });
  const routes = parts.flatMap((p) => p.routes ?? []);
  const server = await serveHttp(config, middleware, log, httpMetrics, [...routes.map((r) => r.router), ...(o.platformRoutes ?? [])]);
  const address = server.address() as AddressInfo;
  return {
    url: `http://${config.host}:${address.port}`,
    api: { host: config.host, port: address.port, pages: [{ title: 'API docs', path: '/docs' }, ...parts.flatMap((p) => p.pages ?? [])] },
    async close() {
      routes.forEach((r) => r.close?.());
      await closeServer(server);
    },
  };
}

/** Where an earlier post or DM went, by its request_id: its kind and target as it was accepted (the policy's `message_ref`). */
function originalDelivery(deliveries: { detail(requestId: string): Promise<{ kind: string; target: unknown }> }): OriginalOf {
  return async (ref) => {
    // Only a request_id can name one (asked before the input is checked: the text may be anything).
    if (!/^[0-9a-f]{64}$/.test(ref)) return undefined;
    try {
      const original = await deliveries.detail(ref);
      return { body: { kind: original.kind, target: original.target } };
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  };
}
