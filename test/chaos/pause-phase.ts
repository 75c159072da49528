import { HERALD_TIMINGS, type PhaseContext } from './campaign.js';
import type { PhaseExtras } from './phase-extras.js';
import { InFlightTap } from './in-flight.js';
import { PausePlan } from './pauses.js';
import { Rng } from './prng.js';

/**
 * The `pauses` phase: Discord's posts, DMs and edits (the short nonce window, so Discord's
 * deduplication cannot save Herald) while Herald processes are stalled past their lease and then
 * continued (test/chaos/pauses.ts): at their fault points, at random, and with a create in flight
 * (test/chaos/in-flight.ts: the sandbox holds the next create, created then answered late or held
 * before it is created, and the process whose create that is is stopped while it is held).
 * No SIGKILLs: a process killed is not one that carries on.
 */
export function pauseExtras(c: PhaseContext): PhaseExtras {
  const plan = new PausePlan(new Rng(c.seed, 'pauses'), Number(HERALD_TIMINGS.HERALD_LEASE_MS));
  const tap = new InFlightTap(plan, /^POST \/api\/v10\/channels\/[0-9]+\/messages[ ?]/);
  return {
    sandbox: {},
    async prepare({ sandbox, specs }) {
      const upstreamPort = Number(new URL(sandbox.url).port);
      for (const spec of specs) spec.env['DISCORD_API_URL'] = `http://127.0.0.1:${await tap.proxy(spec.name, upstreamPort)}/api`;
      plan.prepare(specs);
    },
    keep: (e) => e.what !== 'kill',
    start({ fleet, sandbox, log }) {
      plan.start(fleet, log, (draw) =>
        tap.arm(() => sandbox.inject({ method: 'POST', path: '^/channels/[0-9]+/messages$', action: draw.pick(['delay_after_create', 'delay'] as const), ms: draw.int(1_500, 3_000), times: 1 })),
      );
    },
    async drain(specs) {
      tap.disarm();
      await plan.drain(specs);
    },
    notes: () => [...plan.note(), tap.note('creates (held by the sandbox)')],
    async close() {
      plan.close();
      await tap.close();
    },
  };
}
