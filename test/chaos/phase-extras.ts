import type { DiscordSandbox, SandboxOptions } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { ScheduledEvent } from './campaign.js';
import type { Fleet, MemberSpec } from './fleet.js';
import type { TakeoverReport } from './takeover.js';

/**
 * What the pauses and partitions phases add to a Discord phase (test/chaos/pause-phase.ts,
 * test/chaos/partition-phase.ts): per-process settings, their own chaos beside the schedule's, and
 * lines for the report.
 */
export interface PhaseExtras {
  /** The Discord sandbox's options this phase needs. */
  sandbox: SandboxOptions;
  /** Rewrite each member's settings before anything starts (its proxies, its fault point). */
  prepare(on: { sandbox: DiscordSandbox; databaseUrl: string; specs: MemberSpec[] }): Promise<void>;
  /** Which of the usual schedule's events to keep. */
  keep(event: ScheduledEvent): boolean;
  /** The chaos begins. */
  start(on: { fleet: Fleet; sandbox: DiscordSandbox; t0: number; log: (line: string) => void }): void;
  /** The chaos is over: end what the extras broke (continue, heal), and what they set (fault points) before the settle. */
  drain(specs: MemberSpec[]): Promise<void>;
  /** The report's lines, with the takeovers seen. */
  notes(takeovers: TakeoverReport): string[];
  close(): Promise<void>;
}
