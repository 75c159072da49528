import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { defineModule, ownTables } from '../contract.js';
import { deliveriesModule } from '../deliveries/index.js';
import type { IdentityService } from './identity.service.js';
import { identityTools } from './identity.tools.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { IdentityDb } from './identity.table.js';

export type { IdentityService } from './identity.service.js';

/**
 * The event (src/infra/db/events.ts) naming who just unregistered, and from which bot: the user id
 * alone for the default bot (as every replica has always read it), `<identity> <user id>` for another.
 */
export const UNREGISTERED = 'identity.unregistered';

/** An UNREGISTERED payload for `userId` unregistering from `identity`'s bot. */
export function unregisteredPayload(userId: string, identity: string): string {
  return identity === DEFAULT_IDENTITY ? userId : `${identity} ${userId}`;
}

/** Who unregistered from which bot, read from an UNREGISTERED payload. */
export function unregisteredOf(payload: string): { userId: string; identity: string } {
  const space = payload.indexOf(' ');
  return space < 0 ? { userId: payload, identity: DEFAULT_IDENTITY } : { userId: payload.slice(space + 1), identity: payload.slice(0, space) };
}

/** What the identity module gives the others. */
export interface Identity {
  readonly identity: IdentityService;
}

/** People's registrations, pairing codes and agent tokens (`/agent`). */
export const identityModule = defineModule<Identity, undefined, undefined, IdentityDb>({
  name: 'identity',
  needs: { modules: [deliveriesModule] },
  answers: ['isRegistered', 'registeredOn'],
  tables: ownTables<IdentityDb>(),
  tools: identityTools,
  commands: async () => [(await import('./agent.command.js')).agentCommand],
  async start({ db: tables, clock, registry, transports, use, events, policy }) {
    const db = tablesOf<IdentityDb>(tables);
    const [{ IdentityService }, { identityOperations }, { IdentityMetrics }, { findRegistration }, { identityOf }] = await Promise.all([
      import('./identity.service.js'),
      import('./identity.http.js'),
      import('./identity.metrics.js'),
      import('./identity.repository.js'),
      import('../../infra/http/policy.middleware.js'),
    ]);
    // Others forget what they keep of a person who unregisters (the inbox, their DMs): told after the commit, on every replica.
    const identity = new IdentityService(db, clock, transports.home.name, (userId, bot) => events.publish(UNREGISTERED, unregisteredPayload(userId, bot)));
    // DMs (and edits of DMs) go only to people registered at send time, on the platform they registered on.
    use(deliveriesModule).answer({
      isRegistered: async (userId, speaksAs) => (await findRegistration(db, speaksAs, userId)) !== undefined,
      registeredOn: async (userId, speaksAs) => (await findRegistration(db, speaksAs, userId))?.transport ?? null,
    });
    return { gives: { identity }, operations: [identityOperations(identity, new IdentityMetrics(registry), (koa) => identityOf(koa, policy))] };
  },
});
