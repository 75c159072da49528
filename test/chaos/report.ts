import type { CampaignResult, PhaseResult } from './campaign.js';
import type { PhaseCounts, Violation } from './verify.js';

/**
 * The campaign's table: one row per phase and a total; violations first, then deliveries rightly
 * left undecided between twins in doubt (not a violation), then final states, then
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
    `${p.phase}: ${c.posts} posts, ${c.dms} DMs, ${c.edits} edits (${c.appliedEdits} applied, ${c.unappliedEdits} applied:false); ${c.failedUnmapped} failed on purpose (unmapped destination)`,
    `  chaos: ${p.chaos.kills} SIGKILLs, ${p.chaos.pgRestarts} PostgreSQL restarts, faults: ${faults || 'none'}`,
    `  Herald exits on its own (crashes): ${p.chaos.crashes.length}${p.chaos.crashes.length > 0 ? ` (${p.chaos.crashes.map((x) => `${x.member} code ${x.code} ${x.signal ?? ''}`.trim()).join('; ')})` : ''}; failed start-ups ${p.chaos.startFailures}`,
    `  connectors: ${p.connectors.posts} POSTs (${p.connectors.reposts} re-POSTs, ${p.connectors.blindReposts} blind), ${p.connectors.gets} GETs, ${p.connectors.networkErrors} network errors, ${p.connectors.serverErrors} 5xx, ${p.connectors.protocolErrors.length} unexpected 4xx`,
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
