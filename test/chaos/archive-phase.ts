import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { DiscordSandbox, SANDBOX_IDS, type Fault } from '../../src/platforms/discord/sandbox/sandbox.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { HERALD_TIMINGS, makeSchedule, memberSpecs, sleep, sleepWhile, type PhaseContext, type PhaseResult } from './campaign.js';
import { verifyArchive, type BlobRow, type CursorSample, type ExpectedChannel, type ExpectedItem, type ItemRow, type ScrapeRow, type StoredFile } from './archive-verify.js';
import { newStats } from './connector.js';
import { Fleet } from './fleet.js';
import { countSandboxRequests, preparePhaseDatabase, settle, startChaos } from './phase-kit.js';
import { Rng } from './prng.js';

/**
 * The archive phase of the chaos campaign: media scrapes of several seeded channels (hundreds of
 * messages each, carrying media links and embeds whose files a local file server serves) run on
 * the fleet of real Herald processes while they are SIGKILLed (most often in the middle of a page:
 * the history reads are slowed down, and every download takes its time) and PostgreSQL is stopped
 * hard; the history reads answer 5xx, 429 and late, the file server answers 500, stalls and cuts
 * files short. Then every scrape must complete, every item be indexed exactly once, each content
 * stored once, and no scrape's cursor ever have moved back (sampled from the database all along).
 */

const PHASE = 'archive' as const;

/** The seeded channels: each scraped once, in its mode. */
const CHANNELS = [
  { name: 'photos', id: '456789012345678901', mode: 'download', messages: [210, 280] },
  { name: 'albums', id: '456789012345678902', mode: 'download', messages: [201, 240] },
  { name: 'gallery', id: '456789012345678903', mode: 'links', messages: [600, 800] },
  { name: 'clips', id: '456789012345678904', mode: 'links', messages: [400, 600] },
] as const;
/** Distinct contents the files are drawn from: many URLs share one content (stored once). */
const CONTENTS = 120;

/**
 * This phase's settings over the campaign's: a scrape's claims count as attempts, and so do its
 * steps killed mid-page, so a few kills and faults in a row would fail it for good at the
 * campaign's 4; the verdict is about what the kills do to a scrape, not about giving up. (A
 * function, read when the phase runs: campaign.ts and this module import each other.)
 */
const archiveEnv = (): Record<string, string> => ({ ...HERALD_TIMINGS, HERALD_MAX_ATTEMPTS: '12' });

type FileFault = { action: 'error'; status: number } | { action: 'stall' } | { action: 'cut' } | { action: 'slow'; ms: number };
type ArchiveFault = { on: 'discord'; fault: Fault } | { on: 'files'; fault: FileFault; times: number };

const HISTORY = '^/channels/[0-9]+/messages$';
function randomArchiveFault(rng: Rng): [string, ArchiveFault] {
  const DISCORD_TIMEOUT_MS = Number(HERALD_TIMINGS.HERALD_DISCORD_TIMEOUT_MS);
  const kind = rng.weighted([
    ['history slow', 6],
    ['history 5xx', 2],
    ['history 429', 1],
    ['history timeout', 1],
    ['download slow', 3],
    ['download 500', 2],
    ['download stall', 1],
    ['download cut', 1],
  ] as const);
  switch (kind) {
    case 'history slow':
      // Late but in time: the step holds its lease longer, so a kill lands mid-page.
      return [kind, { on: 'discord', fault: { method: 'GET', path: HISTORY, action: 'delay', ms: rng.int(200, DISCORD_TIMEOUT_MS - 250), times: rng.int(1, 4) } }];
    case 'history 5xx':
      return [kind, { on: 'discord', fault: { method: 'GET', path: HISTORY, action: 'error', status: rng.pick([500, 502, 503]), times: rng.int(1, 2) } }];
    case 'history 429':
      return [kind, { on: 'discord', fault: { method: 'GET', path: HISTORY, action: 'error', status: 429, code: 0, times: 1 } }];
    case 'history timeout':
      return [kind, { on: 'discord', fault: { method: 'GET', path: HISTORY, action: 'delay', ms: DISCORD_TIMEOUT_MS + rng.int(200, 1_000), times: 1 } }];
    case 'download slow':
      return [kind, { on: 'files', fault: { action: 'slow', ms: rng.int(100, 600) }, times: rng.int(1, 6) }];
    case 'download 500':
      return [kind, { on: 'files', fault: { action: 'error', status: rng.pick([500, 503]) }, times: rng.int(1, 3) }];
    case 'download stall':
      return [kind, { on: 'files', fault: { action: 'stall' }, times: 1 }];
    case 'download cut':
      return [kind, { on: 'files', fault: { action: 'cut' }, times: 1 }];
  }
}

/**
 * The phase's CDN: `/f/<content>/<name>.<ext>` serves the bytes of `content` (so many URLs share
 * one content), each after `latencyMs`, with faults taken by the next requests.
 */
class FileServer {
  latencyMs = 8;
  requests = 0;
  readonly faulted = new Map<string, string[]>();
  /** What each URL was answered, in order (for a violation's evidence). */
  readonly served = new Map<string, string[]>();
  private readonly faults: { fault: FileFault; remaining: number }[] = [];
  private readonly server = http.createServer((req, res) => void this.serve(req, res));

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  url(content: number, name: string): string {
    return `${this.origin}/f/c${content}/${name}`;
  }

  static bytes(content: number): Buffer {
    const head = Buffer.from(`herald archive chaos content ${content}|`);
    return Buffer.concat([head, Buffer.alloc(300 + ((content * 37) % 2_500), content % 251)]);
  }

  static sha256(content: number): string {
    return createHash('sha256').update(FileServer.bytes(content)).digest('hex');
  }

  inject(fault: FileFault, times: number): void {
    this.faults.push({ fault, remaining: times });
  }

  clear(): void {
    this.faults.length = 0;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private take(): FileFault | undefined {
    const first = this.faults[0];
    if (first === undefined) return undefined;
    first.remaining -= 1;
    if (first.remaining <= 0) this.faults.shift();
    return first.fault;
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    this.requests += 1;
    const [, , content = '', name = ''] = (req.url ?? '').split('/');
    const n = Number(content.slice(1));
    if (!/^c[0-9]+$/.test(content)) {
      res.writeHead(404).end();
      return;
    }
    const fault = this.take();
    const at = new Date().toISOString();
    const note = (what: string) => this.served.set(`${this.origin}${req.url ?? ''}`, [...(this.served.get(`${this.origin}${req.url ?? ''}`) ?? []), `${at} ${what}`]);
    if (fault !== undefined) this.faulted.set(req.url ?? '', [...(this.faulted.get(req.url ?? '') ?? []), fault.action]);
    note(fault === undefined ? 'asked' : `asked, fault ${fault.action}`);
    res.on('close', () => note(res.writableFinished ? `answered ${res.statusCode} in full` : `closed before the answer was complete (status ${res.headersSent ? res.statusCode : 'not sent'})`));
    if (fault?.action === 'stall') return; // never answered: the downloader gives up
    if (fault?.action === 'error') {
      res.writeHead(fault.status, { 'content-type': 'text/plain' }).end('injected failure');
      return;
    }
    await sleep(this.latencyMs + (fault?.action === 'slow' ? fault.ms : 0));
    const body = FileServer.bytes(n);
    const type = name.endsWith('.mp4') ? 'video/mp4' : name.endsWith('.ogg') ? 'audio/ogg' : 'image/png';
    res.writeHead(200, { 'content-type': type, 'content-length': body.length });
    if (fault?.action === 'cut') res.write(body.subarray(0, body.length >> 1), () => res.destroy());
    else res.end(body);
  }
}

/** Seed one channel: `count` messages, each with one to three media links, every fourth with an embed. */
function seedChannel(sandbox: DiscordSandbox, files: FileServer, rng: Rng, ch: (typeof CHANNELS)[number], count: number): { expected: ExpectedItem[]; oldestId: string } {
  sandbox.addChannel({ id: ch.id, type: 0, name: ch.name, guild_id: SANDBOX_IDS.guild });
  const authors = [SANDBOX_IDS.user];
  const expected: ExpectedItem[] = [];
  let oldestId = '';
  for (let i = 0; i < count; i++) {
    const item = (content: number, name: string) => ({ url: files.url(content, name), sha256: ch.mode === 'download' ? FileServer.sha256(content) : undefined, content });
    const download = ch.mode === 'download';
    // Download channels: one link a message, a third of them to a URL an earlier message carried
    // too (a known file, not fetched again), so a page is a few seconds of downloads on a busy machine.
    const fresh = (k: number, ext: string) => item(rng.int(0, CONTENTS - 1), `${ch.name}-${i}-${k}.${ext}`);
    const again = () => {
      const j = rng.int(0, Math.max(0, i - 1));
      return item(j % CONTENTS, `${ch.name}-shared-${j % 40}.png`);
    };
    const links = download
      ? [rng.chance(0.35) && i > 0 ? again() : fresh(0, rng.pick(['png', 'png', 'mp4', 'ogg']))]
      : Array.from({ length: rng.int(1, 3) }, (_, k) => fresh(k, rng.pick(['png', 'png', 'mp4', 'ogg'])));
    const embed = i % (download ? 10 : 4) === 0 ? { image: fresh(8, 'png'), thumbnail: fresh(9, 'png') } : undefined;
    const m = sandbox.writeAsUser(rng.pick(authors), ch.id, `${ch.name} ${i}: ${links.map((l) => l.url).join(' and ')}`);
    if (embed !== undefined) m.embeds = [{ type: 'rich', title: `${ch.name} album ${i}`, image: { url: embed.image.url }, thumbnail: { url: embed.thumbnail.url } }];
    if (i === 0) oldestId = m.id;
    // Herald's source keys (src/modules/archive/media.ts): embeds' parts first, then the links in order.
    if (embed !== undefined) {
      expected.push({ channelId: ch.id, messageId: m.id, sourceKey: 'e0:image', url: embed.image.url, sha256: embed.image.sha256 });
      expected.push({ channelId: ch.id, messageId: m.id, sourceKey: 'e0:thumbnail', url: embed.thumbnail.url, sha256: embed.thumbnail.sha256 });
    }
    links.forEach((l, k) => expected.push({ channelId: ch.id, messageId: m.id, sourceKey: `l:${k}`, url: l.url, sha256: l.sha256 }));
  }
  return { expected, oldestId };
}

export async function runArchivePhase(c: PhaseContext): Promise<PhaseResult> {
  const rng = new Rng(c.seed, PHASE);
  const t0 = Date.now();
  const stamp = () => `[${PHASE} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  const log = (line: string) => c.log(`${stamp()} ${line}`);
  log(`phase ${PHASE}: ${c.processes} Herald processes, ${c.durationS}s of chaos; media scrapes of ${CHANNELS.length} seeded channels, killed mid-page`);

  const sandbox = await new DiscordSandbox({ mediaMessages: 0 }).start();
  const files = await new FileServer().start();
  let fleet: Fleet | undefined;
  let sampler: Sampler | undefined;
  const aborted = () => c.signal?.aborted === true;
  const onAbort = () => void fleet?.stopAll();
  c.signal?.addEventListener('abort', onAbort);
  try {
    const seedRng = rng.fork('seed');
    const channels: ExpectedChannel[] = [];
    const expected: ExpectedItem[] = [];
    for (const ch of CHANNELS) {
      const count = seedRng.int(ch.messages[0], ch.messages[1]);
      const seeded = seedChannel(sandbox, files, seedRng, ch, count);
      expected.push(...seeded.expected);
      channels.push({ channelId: ch.id, name: ch.name, mode: ch.mode, messages: count, oldestId: seeded.oldestId, scrapeId: undefined });
    }
    const { databaseUrl, dataDir } = await preparePhaseDatabase(c, PHASE);
    const bridgeToken = newToken();
    const adminToken = newToken();
    const env = heraldEnv(
      { sandbox, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken },
      {
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        ...archiveEnv(),
        CHAOS_MEDIA_ORIGINS: `${sandbox.url},${files.origin}`,
      },
    );
    // Each member runs archive-member.ts: the CLI's start-up, trusting the sandbox's and the file server's origins.
    const specs = memberSpecs(c.processes, env).map((s) => ({ ...s, entry: 'test/chaos/archive-member.ts' }));
    fleet = new Fleet(specs, log, c.pidFile, t0);
    const f = fleet;
    log(`starting ${specs.map((s) => s.name).join(', ')}`);
    await fleet.startAll();
    c.signal?.throwIfAborted();
    sampler = new Sampler(databaseUrl);
    sampler.start();
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: ${channels.map((ch) => `#${ch.name} ${ch.messages} messages (${ch.mode})`).join(', ')}; ${expected.length} items`);

    const chaosStart = Date.now();
    // Scrapes start at times drawn from the seed in the first half of the chaos, so kills find them at every stage.
    const startRng = rng.fork('starts');
    const starts = channels.map(async (ch) => {
      await sleepWhile(startRng.float(0, (c.durationS * 1000) / 2), () => !aborted());
      ch.scrapeId = await startScrape(f, adminToken, ch, log, aborted);
    });
    // One operator stop and resume of a download scrape mid-run: it resumes from its cursor.
    const stopRng = rng.fork('stop');
    const stopAt = stopRng.float(0.4, 0.7) * c.durationS * 1000;
    const stopResume = (async () => {
      await sleepWhile(stopAt, () => !aborted());
      const ch = channels.find((x) => x.mode === 'download' && x.scrapeId !== undefined && sampler?.latest(x.scrapeId)?.state === 'running');
      if (ch?.scrapeId === undefined) return 'no download scrape was running to stop';
      const stopped = await callApi(f, adminToken, 'POST', `/admin/archive/scrapes/${ch.scrapeId}/stop`, undefined, aborted);
      await sleepWhile(stopRng.int(300, 1_500), () => !aborted());
      const again = await startScrape(f, adminToken, ch, log, aborted);
      return `#${ch.name} stopped (${stopped.status}, ${(stopped.json as { state?: string } | undefined)?.state ?? '?'}) and started again: ${again === ch.scrapeId ? 'resumed, same scrape' : `answered ${again ?? 'nothing'}`}`;
    })();

    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, c.processes, randomArchiveFault, [300, 1_200]);
    const kills: { at: number; leased: number }[] = [];
    const chaosLog = (line: string) => {
      // Whether a scrape step was in flight when the SIGKILL landed (the newest sample).
      if (line.startsWith('SIGKILL')) kills.push({ at: Date.now(), leased: sampler?.leasedNow() ?? 0 });
      log(line);
    };
    const progress = setInterval(() => log(`progress: ${sampler?.describe() ?? ''}; ${f.kills} kills, ${files.requests} file requests`), 5_000);
    try {
      const chaos = startChaos(c, f, schedule, chaosLog, (fault: ArchiveFault) => (fault.on === 'discord' ? sandbox.inject(fault.fault) : files.inject(fault.fault, fault.times)));
      const { pg: pgState, faultCounts } = chaos;
      await sleepWhile(c.durationS * 1000, () => !aborted());
      await chaos.stop();
      await Promise.all(starts);
      const stopNote = await stopResume;
      c.signal?.throwIfAborted();
      const chaosMs = Date.now() - chaosStart;
      log(`chaos over: ${f.kills} kills, ${pgState.restarts} PostgreSQL restarts, ${Object.values(faultCounts).reduce((a, b) => a + b, 0)} faults, ${f.crashes.length} crashes`);
      sandbox.clearFaults();
      files.clear();
      log('settling: faults cleared, restarting every Herald process');
      await f.restartAll();
      const s = sampler;
      const { settled, settleMs } = await settle(c, () => channels.filter((ch) => ch.scrapeId === undefined || s.latest(ch.scrapeId)?.state === 'running').length, () => s.describe(), log);
      c.signal?.throwIfAborted();

      const verifyStart = Date.now();
      await f.stopAll();
      await s.stop();
      const rows = await archiveRows(databaseUrl);
      const stored = await storedFiles(path.join(dataDir, 'media'));
      const verdict = verifyArchive({
        channels,
        expected,
        scrapes: rows.scrapes,
        items: rows.items,
        blobs: rows.blobs,
        files: stored.files,
        samples: s.samples,
        logsFor: (ids) => scrapeLogLines(f, ids),
      });
      const verifyMs = Date.now() - verifyStart;
      // A failing run prints its evidence here too: what the file server answered, Herald's lines.
      const shown = [...new Set(verdict.violations.map((v) => v.kind))].flatMap((k) => verdict.violations.filter((v) => v.kind === k).slice(0, 2));
      for (const v of shown) {
        const ev = v.evidence as { row?: { url?: string }; expected?: ExpectedItem; herald_log?: string[] } | undefined;
        log(`VIOLATION ${v.kind}: ${v.detail}`);
        if (ev?.row !== undefined) log(`  row: ${JSON.stringify(ev.row)}`);
        const url = ev?.row?.url ?? ev?.expected?.url;
        if (url !== undefined) for (const line of files.served.get(url) ?? ['the file server was never asked for it']) log(`  file server: ${line}`);
        for (const line of (ev?.herald_log ?? []).slice(-15)) log(`  ${line}`);
      }
      // A failed item is Herald's honest answer when the file server failed it; one it answered in
      // full (or was never asked for) failed for a reason of Herald's own: listed for reading.
      const unfaulted = verdict.failedItems.rows.filter((r) => !(files.served.get(r.url) ?? []).some((line) => line.includes('fault')));
      const steps = s.steps();
      const sandboxRequests = countSandboxRequests(sandbox.requests);
      sandboxRequests['file server requests'] = files.requests;
      const violationCount = verdict.violations.length;
      const result: PhaseResult = {
        phase: PHASE,
        counts: verdict.counts,
        violationCount,
        violations: verdict.violations,
        undecided: [],
        chaos: { kills: f.kills, pgRestarts: pgState.restarts, faults: faultCounts, crashes: f.crashes, startFailures: f.startFailures, sandboxRequests },
        connectors: newStats(),
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs: 0, heraldNonceWindowMs: undefined, env: archiveEnv() },
        notes: [
          ...verdict.kindLines,
          verdict.cursorLine,
          `scrapes: ${rows.scrapes.map((r) => `#${channels.find((ch) => ch.channelId === r.channel_id)?.name ?? r.channel_id} ${r.mode} ${r.state} ${r.messages_seen} messages ${r.items_found} items ${r.errors} errors (${r.id.slice(0, 8)})`).join('; ')}`,
          `steps: ${steps.recorded} pages recorded, ${steps.failed} page reads failed, ${steps.released} steps given back with nothing recorded (an error, e.g. PostgreSQL gone), ${steps.interrupted} steps taken over by another worker with nothing recorded (their process killed mid-page); SIGKILLs while some scrape step was in flight: ${kills.filter((k) => k.leased > 0).length} of ${kills.length}`,
          `takeovers: ${steps.takeoverMs.length === 0 ? 'none seen' : `from the killed step's claim to the next worker's: median ${(median(steps.takeoverMs) / 1000).toFixed(1)}s, max ${(Math.max(...steps.takeoverMs) / 1000).toFixed(1)}s`} (lease ${HERALD_TIMINGS.HERALD_LEASE_MS} ms)`,
          `downloads: ${files.requests} file requests, ${files.faulted.size} answered with a fault; ${verdict.failedItems.total} items left failed${Object.keys(verdict.failedItems.byError).length > 0 ? ` (${Object.entries(verdict.failedItems.byError).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''}; ${rows.blobs.length} files stored, ${stored.tmp} partial downloads left in media/tmp`,
          `failed items the file server did not fail: ${unfaulted.length}${unfaulted.length > 0 ? ' (not counted as violations: a download timeout on a loaded machine looks the same)' : ''}`,
          ...unfaulted.slice(0, 5).map((r) => `  - scrape ${r.scrape_id.slice(0, 8)} message ${r.message_id} ${r.source_key}: ${r.error ?? ''}; file server: ${(files.served.get(r.url) ?? ['never asked']).join(' | ')}`),
          `operator stop and resume: ${stopNote}`,
          ...warningLines(f, t0),
        ],
      };
      log(`verdict: ${violationCount === 0 ? 'no violations' : `${violationCount} VIOLATIONS`}`);
      return result;
    } finally {
      clearInterval(progress);
    }
  } finally {
    c.signal?.removeEventListener('abort', onAbort);
    fleet?.halt();
    await fleet?.stopAll();
    await sampler?.stop();
    await files.close();
    await sandbox.close();
  }
}

interface ApiAnswer {
  status: number;
  json: unknown;
}

/** One admin API call on whichever serve process is up, again until one answers (a kill or an outage in between). */
async function callApi(fleet: Fleet, token: string, method: string, route: string, body: unknown, aborted: () => boolean, timeoutMs = 60_000): Promise<ApiAnswer> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    if (aborted()) throw new Error('interrupted');
    const urls = fleet.serveUrls();
    const url = urls[attempt % Math.max(1, urls.length)];
    if (url !== undefined) {
      try {
        const res = await fetch(`${url}${route}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(5_000),
        });
        const text = await res.text();
        if (res.status < 500) return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
      } catch {
        // The process died under the call, or timed out: ask again.
      }
    }
    if (Date.now() > deadline) throw new Error(`${method} ${route}: no answer in ${timeoutMs} ms`);
    await sleep(250);
  }
}

/**
 * Start (or resume) a channel's scrape through the API, as an operator would; a call whose answer
 * was lost and is repeated finds the scrape running (409 with its id).
 */
async function startScrape(fleet: Fleet, token: string, ch: ExpectedChannel, log: (line: string) => void, aborted: () => boolean): Promise<string | undefined> {
  const answer = await callApi(fleet, token, 'POST', '/admin/archive/scrapes', { channelId: ch.channelId, mode: ch.mode, confirm: true }, aborted);
  const json = answer.json as { id?: string; scrapeId?: string; error?: string } | undefined;
  const id = answer.status === 409 ? json?.scrapeId : json?.id;
  log(`scrape of #${ch.name} (${ch.mode}): ${answer.status}${id !== undefined ? ` ${id}` : ` ${json?.error ?? ''}`}`);
  return id;
}

/**
 * Reads every scrape's row every 150 ms all along (again after PostgreSQL comes back): its cursor,
 * counters, state and the worker holding its step.
 */
class Sampler {
  readonly samples: CursorSample[] = [];
  private running = true;
  private loop: Promise<void> | undefined;
  private readonly last = new Map<string, CursorSample>();

  constructor(private readonly databaseUrl: string) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  latest(scrapeId: string): CursorSample | undefined {
    return this.last.get(scrapeId);
  }

  leasedNow(): number {
    return [...this.last.values()].filter((s) => s.leaseOwner !== null).length;
  }

  describe(): string {
    return [...this.last.values()].map((s) => `${s.scrapeId.slice(0, 8)} ${s.state} ${s.messagesSeen} messages ${s.itemsFound} items`).join(', ') || 'no scrape yet';
  }

  /**
   * Each tenure of a worker on a scrape (one step): recorded when the scrape's count of messages
   * read grew before the next holder, failed when its errors grew, interrupted when neither did
   * (its process was killed mid-page, or its lease ran out).
   */
  steps(): { recorded: number; failed: number; interrupted: number; released: number; takeoverMs: number[] } {
    const out = { recorded: 0, failed: 0, interrupted: 0, released: 0, takeoverMs: [] as number[] };
    const byScrape = new Map<string, CursorSample[]>();
    for (const s of this.samples) byScrape.set(s.scrapeId, [...(byScrape.get(s.scrapeId) ?? []), s]);
    for (const list of byScrape.values()) {
      let holder: CursorSample | undefined;
      // After an interrupted step: when its holder was last seen, until another worker holds the scrape.
      let orphanedSince: number | undefined;
      for (const s of list) {
        if (holder !== undefined && s.leaseOwner !== holder.leaseOwner) {
          if (s.messagesSeen > holder.messagesSeen) out.recorded += 1;
          else if (s.errors > holder.errors) out.failed += 1;
          else if (s.state === holder.state && s.leaseOwner === null) out.released += 1;
          else if (s.state === holder.state) {
            // Another worker holds it with nothing recorded: the lease ran out (its process was killed mid-page).
            out.interrupted += 1;
            orphanedSince = holder.at;
          }
          holder = undefined;
        }
        if (holder === undefined && s.leaseOwner !== null) {
          holder = s;
          if (orphanedSince !== undefined) out.takeoverMs.push(s.at - orphanedSince);
          orphanedSince = undefined;
        }
      }
    }
    return out;
  }

  private async run(): Promise<void> {
    let client: pg.Client | undefined;
    while (this.running) {
      try {
        if (client === undefined) {
          const fresh = new pg.Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 1_000 });
          // A connection cut by PostgreSQL's stop reports here, not as an unhandled error.
          fresh.on('error', () => undefined);
          await fresh.connect();
          client = fresh;
        }
        const { rows } = await client.query<{ id: string; cursor: string | null; messages_seen: number; items_found: number; errors: number; state: string; lease_owner: string | null }>(
          'select id, cursor, messages_seen, items_found, errors, state, lease_owner from media_scrapes',
        );
        const at = Date.now();
        for (const r of rows) {
          const sample: CursorSample = { at, scrapeId: r.id, cursor: r.cursor, messagesSeen: r.messages_seen, itemsFound: r.items_found, errors: r.errors, state: r.state, leaseOwner: r.lease_owner };
          this.samples.push(sample);
          this.last.set(r.id, sample);
        }
      } catch {
        await client?.end().catch(() => undefined);
        client = undefined;
      }
      await sleep(150);
    }
    await client?.end().catch(() => undefined);
  }
}

async function archiveRows(databaseUrl: string): Promise<{ scrapes: ScrapeRow[]; items: ItemRow[]; blobs: BlobRow[] }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const scrapes = (await client.query<ScrapeRow>('select id, channel_id, mode, state, cursor, messages_seen, items_found, errors, last_error, pause_reason, attempts from media_scrapes')).rows;
    const items = (await client.query<ItemRow>('select id::text as id, scrape_id, channel_id, message_id, source_key, url, sha256, state, error from media_items')).rows;
    const blobs = (await client.query<{ sha256: string; size_bytes: string; path: string }>('select sha256, size_bytes, path from media_blobs')).rows.map((b) => ({ sha256: b.sha256, size_bytes: Number(b.size_bytes), path: b.path }));
    return { scrapes, items, blobs };
  } finally {
    await client.end();
  }
}

/** Every file in the media folder with the digest of its bytes, and how many partial downloads tmp/ still holds. */
async function storedFiles(mediaDir: string): Promise<{ files: StoredFile[]; tmp: number }> {
  const files: StoredFile[] = [];
  let tmp = 0;
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const full = path.join(dir, e.name);
      const relativePath = path.relative(mediaDir, full);
      if (e.isDirectory()) {
        if (relativePath === 'tmp') tmp += (await readdir(full).catch(() => [])).length;
        else await walk(full);
      } else {
        const bytes = await readFile(full);
        files.push({ relativePath, sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length });
      }
    }
  };
  await walk(mediaDir);
  return { files, tmp };
}

/** Every line any Herald process of the phase printed about these scrapes (capped), in time order. */
function scrapeLogLines(fleet: Fleet, ids: string[]): string[] {
  const out: { at: number; line: string }[] = [];
  for (const inc of fleet.incarnations) {
    for (const line of inc.output().split('\n')) {
      if (!ids.some((id) => line.includes(`"scrape_id":"${id}"`))) continue;
      out.push({ at: Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0), line: `${inc.member}#${inc.pid ?? '-'} ${line.length > 600 ? `${line.slice(0, 600)}…` : line}` });
    }
  }
  const lines = out.sort((a, b) => a.at - b.at).map((x) => x.line);
  return lines.length > 60 ? [...lines.slice(0, 30), `… ${lines.length - 60} more …`, ...lines.slice(-30)] : lines;
}

/** Herald's warnings and errors over the phase, by message: how many, first and last (seconds into the phase). */
function warningLines(fleet: Fleet, t0: number): string[] {
  const by = new Map<string, { n: number; first: number; last: number }>();
  for (const inc of fleet.incarnations) {
    for (const line of inc.output().split('\n')) {
      const level = Number(/"level":([0-9]+)/.exec(line)?.[1] ?? 0);
      if (level < 40) continue;
      const msg = /"msg":"([^"]{0,120})/.exec(line)?.[1] ?? '?';
      const at = (Number(/"time":([0-9]+)/.exec(line)?.[1] ?? t0) - t0) / 1000;
      const e = by.get(msg) ?? { n: 0, first: at, last: at };
      by.set(msg, { n: e.n + 1, first: Math.min(e.first, at), last: Math.max(e.last, at) });
    }
  }
  return [...by].sort((a, b) => b[1].n - a[1].n).slice(0, 12).map(([msg, e]) => `herald warning ×${e.n} (${e.first.toFixed(1)}s–${e.last.toFixed(1)}s): ${msg}`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}
