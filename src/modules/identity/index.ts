import { defineModule } from '../contract.js';
import type { IdentityService } from './identity.service.js';
import { identityTools } from './identity.tools.js';

export type { IdentityService } from './identity.service.js';

/** What the identity module gives the others. */
export interface Identity {
  readonly identity: IdentityService;
}

/** People's registrations, pairing codes and agent tokens (`/agent`). */
export const identityModule = defineModule<Identity>({
  name: 'identity',
  migrations: ['2026-11-29T20-00-00_identity'],
  tools: identityTools,
  commands: async () => [(await import('./agent.command.js')).agentCommand],
  async start({ db, clock, registry }) {
    const [{ IdentityService }, { identityOperations }, { IdentityMetrics }] = await Promise.all([import('./identity.service.js'), import('./identity.http.js'), import('./identity.metrics.js')]);
    const identity = new IdentityService(db, clock);
    return { gives: { identity }, operations: [identityOperations(identity, new IdentityMetrics(registry))] };
  },
});
