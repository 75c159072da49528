import type { PhaseCounts, Violation, ViolationKind } from './verify.js';

/**
 * The verdict of the archive phase, from what is left once every process has stopped: the media
 * items, scrapes and stored files in the database, the files in the media folder, and the cursor
 * samples taken during the run. Every item the seeded channels hold is indexed exactly once by its
 * channel's scrape (stored with the right content in download mode), every file is stored once per
 * content, every scrape completed having read each message once, and no cursor ever moved back.
 */

/** One piece of media a seeded message carries, as the phase put it there. */
export interface ExpectedItem {
  channelId: string;
  messageId: string;
  /** Which part of the message (Herald's source_key: `l:<n>` the n-th media link, `e<i>:image`…). */
  sourceKey: string;
  url: string;
  /** The SHA-256 of the bytes a download must store; undefined for URLs never fetched (links mode, other hosts). */
  sha256: string | undefined;
}

/** A seeded channel and the scrape the phase asked for. */
export interface ExpectedChannel {
  channelId: string;
  name: string;
  mode: 'links' | 'download';
  messages: number;
  /** The oldest message's id: where a completed scrape's cursor ends. */
  oldestId: string;
  /** The scrape's id as the API answered it (undefined: the start never got an answer). */
  scrapeId: string | undefined;
}

export interface ScrapeRow {
  id: string;
  channel_id: string;
  mode: string;
  state: string;
  cursor: string | null;
  messages_seen: number;
  items_found: number;
  errors: number;
  last_error: string | null;
  pause_reason: string | null;
  attempts: number;
}

export interface ItemRow {
  id: string;
  scrape_id: string;
  channel_id: string;
  message_id: string;
  source_key: string;
  url: string;
  sha256: string | null;
  state: string;
  error: string | null;
}

export interface BlobRow {
  sha256: string;
  size_bytes: number;
  path: string;
}

/** A file found in the media folder (outside tmp/), with the digest of its bytes. */
export interface StoredFile {
  relativePath: string;
  sha256: string;
  size: number;
}

/** One reading of a scrape's row during the run. */
export interface CursorSample {
  at: number;
  scrapeId: string;
  cursor: string | null;
  messagesSeen: number;
  itemsFound: number;
  state: string;
  errors: number;
  /** The worker holding the scrape's step, if one does. */
  leaseOwner: string | null;
}

export interface ArchiveVerifyInput {
  channels: ExpectedChannel[];
  expected: ExpectedItem[];
  scrapes: ScrapeRow[];
  items: ItemRow[];
  blobs: BlobRow[];
  files: StoredFile[];
  samples: CursorSample[];
  /** Herald's log lines about these scrapes (capped). */
  logsFor(scrapeIds: string[]): string[];
}

export interface ArchiveVerdict {
  counts: PhaseCounts;
  violations: Violation[];
  /** The per-kind lines, in the report's form. */
  kindLines: string[];
  cursorLine: string;
  /** Items whose download failed (a fault on the file server, mostly): counted, not violations. */
  failedItems: { total: number; byError: Record<string, number>; rows: ItemRow[] };
}

type Kind = 'archive-item' | 'archive-scrape' | 'archive-file';
interface Tally {
  sent: number;
  duplicates: number;
  lost: number;
  stuck: number;
  misattributed: number;
}

export function verifyArchive(input: ArchiveVerifyInput): ArchiveVerdict {
  const violations: Violation[] = [];
  const tally: Record<Kind, Tally> = {
    'archive-item': { sent: input.expected.length, duplicates: 0, lost: 0, stuck: 0, misattributed: 0 },
    'archive-scrape': { sent: input.channels.length, duplicates: 0, lost: 0, stuck: 0, misattributed: 0 },
    'archive-file': { sent: 0, duplicates: 0, lost: 0, stuck: 0, misattributed: 0 },
  };
  const flag = (kind: Kind, what: ViolationKind, scrapeIds: string[], detail: string, evidence: Record<string, unknown> = {}): void => {
    const t = tally[kind];
    if (what === 'duplicate') t.duplicates += 1;
    else if (what === 'lost') t.lost += 1;
    else if (what === 'stuck') t.stuck += 1;
    else t.misattributed += 1;
    // Violations carry scrape ids where deliveries carry request ids.
    violations.push({ kind: what, requestIds: scrapeIds, detail: `${kind}: ${detail}`, evidence: { ...evidence, herald_log: input.logsFor(scrapeIds) } });
  };

  // Scrapes: one per seeded channel, the one the API answered, completed having read every message once.
  const scrapesByChannel = new Map<string, ScrapeRow[]>();
  for (const s of input.scrapes) scrapesByChannel.set(s.channel_id, [...(scrapesByChannel.get(s.channel_id) ?? []), s]);
  const channelOf = new Map(input.channels.map((ch) => [ch.channelId, ch]));
  const scrapeOfChannel = new Map<string, ScrapeRow>();
  for (const ch of input.channels) {
    const rows = scrapesByChannel.get(ch.channelId) ?? [];
    if (rows.length > 1) flag('archive-scrape', 'duplicate', rows.map((r) => r.id), `${rows.length} scrapes of #${ch.name} (${ch.channelId}) where one was started`, { scrapes: rows });
    const row = rows.find((r) => r.id === ch.scrapeId) ?? rows[0];
    if (row === undefined) {
      flag('archive-scrape', 'lost', ch.scrapeId !== undefined ? [ch.scrapeId] : [], `no scrape of #${ch.name} (${ch.channelId}) in the database (the API answered ${ch.scrapeId ?? 'nothing'})`);
      continue;
    }
    scrapeOfChannel.set(ch.channelId, row);
    if (ch.scrapeId !== undefined && row.id !== ch.scrapeId) flag('archive-scrape', 'misattributed', [row.id, ch.scrapeId], `the API answered scrape ${ch.scrapeId} for #${ch.name}, the database holds ${row.id}`);
    if (row.mode !== ch.mode) flag('archive-scrape', 'misattributed', [row.id], `#${ch.name} was started in ${ch.mode} mode, its scrape is ${row.mode}`);
    if (row.state !== 'completed') {
      flag('archive-scrape', 'stuck', [row.id], `#${ch.name}: ${row.state} after settling (read ${row.messages_seen} of ${ch.messages} messages, cursor ${row.cursor ?? 'none'}, attempts ${row.attempts}, errors ${row.errors}, last error ${JSON.stringify(row.last_error)}${row.pause_reason !== null ? `, paused: ${row.pause_reason}` : ''})`, { scrape: row });
    } else {
      if (row.messages_seen !== ch.messages) flag('archive-scrape', row.messages_seen > ch.messages ? 'duplicate' : 'lost', [row.id], `#${ch.name} completed having counted ${row.messages_seen} messages read; the channel holds ${ch.messages}`, { scrape: row });
      if (row.cursor !== ch.oldestId) flag('archive-scrape', 'lost', [row.id], `#${ch.name} completed with its cursor at ${row.cursor ?? 'none'}, not at the oldest message ${ch.oldestId}`, { scrape: row });
    }
  }
  for (const s of input.scrapes) if (!channelOf.has(s.channel_id)) flag('archive-scrape', 'misattributed', [s.id], `a scrape of channel ${s.channel_id}, which the phase never asked for`, { scrape: s });

  // Items: each expected one exactly once, in its channel's scrape, as the mode stores it.
  const key = (channelId: string, messageId: string, sourceKey: string) => `${channelId}/${messageId}/${sourceKey}`;
  const rowsByKey = new Map<string, ItemRow[]>();
  for (const r of input.items) {
    const k = key(r.channel_id, r.message_id, r.source_key);
    rowsByKey.set(k, [...(rowsByKey.get(k) ?? []), r]);
  }
  const expectedKeys = new Set<string>();
  const failedItems = { total: 0, byError: {} as Record<string, number>, rows: [] as ItemRow[] };
  for (const e of input.expected) {
    const k = key(e.channelId, e.messageId, e.sourceKey);
    expectedKeys.add(k);
    const ch = channelOf.get(e.channelId);
    const scrape = scrapeOfChannel.get(e.channelId);
    const rows = rowsByKey.get(k) ?? [];
    if (rows.length === 0) {
      flag('archive-item', 'lost', scrape !== undefined ? [scrape.id] : [], `message ${e.messageId} of #${ch?.name ?? e.channelId}: no item for ${e.sourceKey} (${e.url})`);
      continue;
    }
    if (rows.length > 1) flag('archive-item', 'duplicate', [...new Set(rows.map((r) => r.scrape_id))], `message ${e.messageId} of #${ch?.name ?? e.channelId}: ${rows.length} items for ${e.sourceKey}`, { rows });
    for (const r of rows) {
      const wrong: string[] = [];
      if (scrape !== undefined && r.scrape_id !== scrape.id) wrong.push(`in scrape ${r.scrape_id}, not ${scrape.id}`);
      if (r.url !== e.url) wrong.push(`url ${r.url}, not ${e.url}`);
      if (ch?.mode === 'links' && (r.state !== 'linked' || r.sha256 !== null)) wrong.push(`state ${r.state} with sha256 ${r.sha256 ?? 'none'} in links mode`);
      if (ch?.mode === 'download') {
        if (r.state === 'stored' && r.sha256 !== e.sha256) wrong.push(`stored as ${r.sha256 ?? 'no digest'}, its bytes are ${e.sha256 ?? 'not fetchable'}`);
        else if (r.state === 'failed') {
          failedItems.total += 1;
          failedItems.rows.push(r);
          const why = (r.error ?? 'no reason').replace(/[0-9]+/g, 'N').slice(0, 80);
          failedItems.byError[why] = (failedItems.byError[why] ?? 0) + 1;
        } else if (r.state !== 'stored') wrong.push(`${r.state} (${r.error ?? 'no reason'}): the file server's downloads are allowed`);
      }
      if (wrong.length > 0) flag('archive-item', 'misattributed', [r.scrape_id], `message ${e.messageId} of #${ch?.name ?? e.channelId}, ${e.sourceKey}: ${wrong.join('; ')}`, { row: r, expected: e });
    }
  }
  for (const [k, rows] of rowsByKey) {
    if (expectedKeys.has(k)) continue;
    for (const r of rows) flag('archive-item', 'misattributed', [r.scrape_id], `an item no seeded message carries: message ${r.message_id} of channel ${r.channel_id}, ${r.source_key} (${r.url})`, { row: r });
  }
  // The scrape's own count agrees with its rows.
  for (const [channelId, scrape] of scrapeOfChannel) {
    const rows = input.items.filter((r) => r.scrape_id === scrape.id).length;
    if (scrape.items_found !== rows) flag('archive-scrape', 'misattributed', [scrape.id], `#${channelOf.get(channelId)?.name ?? channelId} counts ${scrape.items_found} items found, ${rows} rows are indexed`, { scrape });
  }

  // Stored files: one row and one file per content, each file's bytes what its name says.
  const stored = new Set(input.items.flatMap((r) => (r.state === 'stored' && r.sha256 !== null ? [r.sha256] : [])));
  tally['archive-file'].sent = stored.size;
  const blobs = new Map(input.blobs.map((b) => [b.sha256, b]));
  const filesByDigest = new Map<string, StoredFile[]>();
  for (const f of input.files) filesByDigest.set(f.sha256, [...(filesByDigest.get(f.sha256) ?? []), f]);
  for (const sha of stored) {
    const blob = blobs.get(sha);
    const files = filesByDigest.get(sha) ?? [];
    if (blob === undefined) flag('archive-file', 'lost', [], `items are stored as ${sha}, media_blobs has no row for it`);
    if (files.length === 0) flag('archive-file', 'lost', [], `items are stored as ${sha}, no file in the media folder holds those bytes`, { blob });
    if (files.length > 1) flag('archive-file', 'duplicate', [], `${files.length} files hold the bytes ${sha}: ${files.map((f) => f.relativePath).join(', ')}`);
    if (blob !== undefined && files.length > 0 && !files.some((f) => f.relativePath === blob.path)) flag('archive-file', 'misattributed', [], `media_blobs says ${sha} is at ${blob.path}; its bytes are at ${files.map((f) => f.relativePath).join(', ')}`);
  }
  for (const f of input.files) {
    const named = /([0-9a-f]{64})$/.exec(f.relativePath)?.[1];
    if (named !== f.sha256) flag('archive-file', 'misattributed', [], `${f.relativePath} holds bytes whose digest is ${f.sha256}`);
    else if (!stored.has(f.sha256)) flag('archive-file', 'misattributed', [], `${f.relativePath}: a file no stored item references`, { blob: blobs.get(f.sha256) });
  }
  for (const b of input.blobs) if (!stored.has(b.sha256)) flag('archive-file', 'misattributed', [], `media_blobs row ${b.sha256} (${b.path}) that no stored item references`);

  // The cursor only moves back in history (to older, smaller ids); the counters only grow.
  const byScrape = new Map<string, CursorSample[]>();
  for (const s of input.samples) byScrape.set(s.scrapeId, [...(byScrape.get(s.scrapeId) ?? []), s]);
  let backward = 0;
  for (const [scrapeId, list] of byScrape) {
    list.sort((a, b) => a.at - b.at);
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1] as CursorSample;
      const b = list[i] as CursorSample;
      const problems: string[] = [];
      if (a.cursor !== null && (b.cursor === null || BigInt(b.cursor) > BigInt(a.cursor))) problems.push(`cursor ${a.cursor} → ${b.cursor ?? 'none'}`);
      if (b.messagesSeen < a.messagesSeen) problems.push(`messages seen ${a.messagesSeen} → ${b.messagesSeen}`);
      if (b.itemsFound < a.itemsFound) problems.push(`items found ${a.itemsFound} → ${b.itemsFound}`);
      if (problems.length > 0) {
        backward += 1;
        flag('archive-scrape', 'misattributed', [scrapeId], `moved backwards between samples at ${new Date(a.at).toISOString()} and ${new Date(b.at).toISOString()}: ${problems.join(', ')}`, { before: a, after: b });
      }
    }
  }

  const counts: PhaseCounts = {
    deliveries: input.expected.length,
    posts: 0,
    dms: 0,
    edits: 0,
    messages: input.items.length,
    duplicates: sum(tally, 'duplicates'),
    extraMessages: Math.max(0, input.items.length - rowsByKey.size),
    lost: sum(tally, 'lost'),
    stuck: sum(tally, 'stuck'),
    misattributed: sum(tally, 'misattributed'),
    editOrder: 0,
    failedButSent: 0,
    orphans: 0,
    undecided: 0,
    // Scrapes by their final state: completed as delivered, the rest as what they are closest to.
    states: {
      delivered: input.scrapes.filter((s) => s.state === 'completed').length,
      failed: input.scrapes.filter((s) => s.state === 'failed').length,
      unknown: input.scrapes.filter((s) => s.state === 'paused' || s.state === 'stopped').length,
      pending: input.scrapes.filter((s) => s.state === 'running').length,
      missing: input.channels.filter((ch) => !scrapeOfChannel.has(ch.channelId)).length,
    },
    failedUnmapped: 0,
    appliedEdits: 0,
    unappliedEdits: 0,
  };
  const kindLines = (Object.keys(tally) as Kind[]).map((k) => {
    const t = tally[k];
    return `kind ${k}: sent ${t.sent}, duplicates ${t.duplicates}, lost ${t.lost}, stuck ${t.stuck}, misattributed ${t.misattributed}`;
  });
  return { counts, violations, kindLines, cursorLine: `cursor: ${input.samples.length} samples, ${backward} backward moves`, failedItems };
}

function sum(tally: Record<Kind, Tally>, field: keyof Tally): number {
  return Object.values(tally).reduce((n, t) => n + t[field], 0);
}
