import type { CampaignResult, PhaseResult } from './campaign.js';
import type { PhaseCounts, Violation } from './verify.js';

/**
 * The campaign's table: one row per phase and a total; violations first, then deliveries rightly
 * left undecided between twins in doubt (counted again under unknown-twins, a violation: twins must
 * never be in doubt together), then final states, then
 * Herald processes that exited on their own (not a delivery violation, but a defect all the same).
 */
export function formatTable(result: CampaignResult): string {
  const crashes = new Map(result.phases.map((p) => [p.counts, p.chaos.crashes.length]));
  const columns: [string, (c: PhaseCounts) => number][] = [
    ['deliveries', (c) => c.deliveries],
    ['messages', (c) => c.messages],
    ['duplicates', (c) => c.duplicates],
    ['lost', (c) => c.lost],
    ['stuck', (c) => c.stuck],
    ['misattributed', (c) => c.misattributed],
    ['edit-order', (c) => c.editOrder],
    ['failed-but-sent', (c) => c.failedButSent],
    ['orphans', (c) => c.orphans],
    ['stale-writes', (c) => c.staleWrites ?? 0],
    ['unknown-twins', (c) => c.unknownTwins ?? 0],
    ['undecided', (c) => c.undecided],
    ['delivered', (c) => c.states.delivered],
    ['failed', (c) => c.states.failed],
    ['unknown', (c) => c.states.unknown],
    ['pending', (c) => c.states.pending],
    ['crashes', (c) => crashes.get(c) ?? 0],
  ];
  const rows: [string, number[]][] = result.phases.map((p) => [p.phase, columns.map(([, f]) => f(p.counts))]);
  if (result.phases.length > 1) rows.push(['total', columns.map((_, i) => rows.reduce((n, [, v]) => n + (v[i] ?? 0), 0))]);
  const first = Math.max(6, ...rows.map(([name]) => name.length));
  const widths = columns.map(([h], i) => Math.max(h.length, ...rows.map(([, v]) => String(v[i]).length)));
  const line = (name: string, cells: string[]) => `${name.padEnd(first)}  ${cells.map((c, i) => c.padStart(widths[i] ?? 0)).join('  ')}`;
  const out = [line('phase', columns.map(([h]) => h)), line('-'.repeat(first), widths.map((w) => '-'.repeat(w)))];
  for (const [name, values] of rows) out.push(line(name, values.map(String)));
  return out.join('\n');
}

/** What else happened in each phase: the chaos applied, and what the connectors went through. */
export function formatDetails(result: CampaignResult): string {
  return result.phases.map((p) => phaseDetails(p)).join('\n');
}

function phaseDetails(p: PhaseResult): string {
  const c = p.counts;
  const faults = Object.entries(p.chaos.faults)
    .sort()
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  const lines = [
    `${p.phase}: ${c.posts} posts, ${c.dms} DMs, ${c.edits} edits (${c.appliedEdits} applied, ${c.unappliedEdits} applied:false)${c.reactions !== undefined && c.reactions > 0 ? `, ${c.reactions} reactions (${c.reactionsShown ?? 0} shown once each)` : ''}${c.files !== undefined && c.files > 0 ? `, ${c.files} with files (${c.filesShown ?? 0} carrying exactly them, ${c.filesDeleted ?? 0} deleted on purpose)` : ''}${c.deletes !== undefined && c.deletes > 0 ? `, ${c.deletes} deletes (${c.deletesDone ?? 0} deleted exactly once)` : ''}; ${c.failedUnmapped} failed on purpose (unmapped destination)`,
    `  chaos: ${p.chaos.kills} SIGKILLs, ${p.chaos.pgRestarts} PostgreSQL restarts, faults: ${faults || 'none'}`,
    `  Herald exits on its own (crashes): ${p.chaos.crashes.length}${p.chaos.crashes.length > 0 ? ` (${p.chaos.crashes.map((x) => `${x.member} code ${x.code} ${x.signal ?? ''}`.trim()).join('; ')})` : ''}; failed start-ups ${p.chaos.startFailures}`,
    `  connectors: ${p.connectors.posts} POSTs (${p.connectors.reposts} re-POSTs, ${p.connectors.blindReposts} blind), ${p.connectors.gets} GETs, ${p.connectors.networkErrors} network errors, ${p.connectors.serverErrors} 5xx, ${p.connectors.protocolErrors.length} unexpected 4xx${p.connectors.uploads !== undefined ? `; ${p.connectors.uploads} file uploads (${p.connectors.uploadRetries ?? 0} rounds retried, ${p.connectors.uploadsGivenUp ?? 0} given up)` : ''}`,
    `  settled: ${p.settled ? 'yes' : 'NO'}; setup ${s(p.timings.setupMs)}, chaos ${s(p.timings.chaosMs)}, settle ${s(p.timings.settleMs)}, verify ${s(p.timings.verifyMs)}`,
  ];
  for (const note of p.notes ?? []) lines.push(`  ${note}`);
  for (const e of p.connectors.protocolErrors.slice(0, 3)) lines.push(`  unexpected answer: ${e.slice(0, 300)}`);
  for (const x of p.chaos.crashes.slice(0, 5)) {
    const why = x.tail.find((l) => /^\s*(\w*Error\b|Emitted 'error'|Unhandled|node:internal)/.test(l)) ?? x.tail.at(-1) ?? '';
    lines.push(`  crash: ${x.member} pid ${x.pid ?? '-'} at ${s(x.at)}: ${why.trim().slice(0, 240)}`);
  }
  return lines.join('\n');
}

/**
 * Each delivery counted undecided, one line each: its identical-content group, the unresolved
 * members and the unattributed messages with that content (whose nonce they carry), its doubt.
 */
export function formatUndecided(result: CampaignResult): string {
  const out: string[] = [];
  for (const p of result.phases) {
    if (p.undecided.length === 0) continue;
    out.push(`${p.phase}: ${p.undecided.length} undecided (unknown: "another unresolved delivery with the same content may own the matching message", twins confirmed in doubt together)`);
    for (const u of p.undecided) out.push(`  - ${u.line}`);
  }
  return out.join('\n');
}

/** A few violations of each kind, one paragraph each, with the messages involved. */
export function formatViolations(result: CampaignResult, perKind = 3): string {
  const out: string[] = [];
  for (const p of result.phases) {
    const byKind = new Map<string, Violation[]>();
    for (const v of p.violations) byKind.set(v.kind, [...(byKind.get(v.kind) ?? []), v]);
    for (const [kind, list] of byKind) {
      out.push(`${p.phase}: ${list.length} × ${kind}`);
      for (const v of list.slice(0, perKind)) {
        out.push(`  - ${v.requestIds.map((id) => id.slice(0, 12)).join(', ') || '(no delivery)'}: ${v.detail}`);
        const ev = v.evidence as { deliveries?: { request_id: string; row?: Record<string, unknown>; connector?: { timeline: string[] } }[]; messages?: Record<string, unknown>[]; gateway_log?: string[] } | undefined;
        for (const m of ev?.messages ?? []) out.push(`      message ${String(m['id'])} ch ${String(m['channel_id'])} nonce-of ${String(m['nonce_of']).slice(0, 12)} created ${String(m['created'])} edits ${String(m['edits'])}`);
        for (const d of ev?.deliveries ?? []) {
          const r = d.row;
          if (r !== undefined) out.push(`      row ${d.request_id.slice(0, 12)}: status ${String(r['status'])} attempts ${String(r['attempts'])} message_id ${String(r['message_id'])} reason ${JSON.stringify(r['reason'] ?? null)}`);
          const tl = d.connector?.timeline ?? [];
          if (tl.length > 0) out.push(`      connector ${d.request_id.slice(0, 12)}: ${tl.slice(-6).join(' | ')}`);
        }
        // Whether the gateway was there to report these messages' nonces.
        const gw = ev?.gateway_log ?? [];
        if (gw.length > 0) out.push(`      gateway: ${gw.length > 12 ? [...gw.slice(0, 6), '…', ...gw.slice(-6)].join(' | ') : gw.join(' | ')}`);
      }
      if (list.length > perKind) out.push(`  … ${list.length - perKind} more in the JSON report`);
    }
  }
  return out.join('\n');
}

function s(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/** The violation kinds a phase reports per kind of work, in the report's order. */
const KIND_COLUMNS = ['duplicates', 'lost', 'stuck', 'misattributed'] as const;

/**
 * A phase's line for one kind of work, the form `formatKinds` reads back from its notes:
 * `kind <kind>: sent N, duplicates N, lost N, stuck N, misattributed N`.
 */
export function kindLine(kind: string, sent: number, v: Record<(typeof KIND_COLUMNS)[number], number>): string {
  return `kind ${kind}: sent ${sent}, ${KIND_COLUMNS.map((c) => `${c} ${v[c]}`).join(', ')}`;
}

/** Per-kind lines for deliveries tracked by kind, from the violations that name their request ids. */
export function kindLines(tracked: readonly { requestId: string; kind: string; accepted: boolean }[], violations: readonly Violation[]): string[] {
  const kindOf = new Map(tracked.map((t) => [t.requestId, t.kind]));
  const kinds = [...new Set(tracked.map((t) => t.kind))].sort();
  const column: Record<string, (typeof KIND_COLUMNS)[number]> = { duplicate: 'duplicates', lost: 'lost', stuck: 'stuck', misattributed: 'misattributed' };
  return kinds.map((kind) => {
    const flagged = { duplicates: new Set<string>(), lost: new Set<string>(), stuck: new Set<string>(), misattributed: new Set<string>() };
    for (const v of violations) {
      const c = column[v.kind];
      if (c === undefined) continue;
      for (const id of v.requestIds) if (kindOf.get(id) === kind) flagged[c].add(id);
    }
    const sent = tracked.filter((t) => t.kind === kind && t.accepted).length;
    return kindLine(kind, sent, { duplicates: flagged.duplicates.size, lost: flagged.lost.size, stuck: flagged.stuck.size, misattributed: flagged.misattributed.size });
  });
}

const KIND_LINE = /^kind (\S+): sent (\d+), duplicates (\d+), lost (\d+), stuck (\d+), misattributed (\d+)$/;

/** The campaign's per-kind table: every phase's `kind …` lines, one row per phase and kind. */
export function formatKinds(result: CampaignResult): string {
  const rows: string[][] = [];
  for (const p of result.phases) {
    for (const note of p.notes ?? []) {
      const m = KIND_LINE.exec(note);
      if (m !== null) rows.push([p.phase, ...m.slice(1)]);
    }
  }
  if (rows.length === 0) return '';
  const header = ['phase', 'kind', 'sent', ...KIND_COLUMNS];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** Every phase's takeover lines (`takeover …`, `nonce-ledger gap …`), for the end of the report. */
export function formatTakeovers(result: CampaignResult): string {
  return result.phases
    .flatMap((p) => (p.notes ?? []).filter((n) => n.startsWith('takeover ') || n.startsWith('nonce-ledger gap')).map((n) => `${p.phase}: ${n}`))
    .join('\n');
}
