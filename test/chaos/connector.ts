import { SANDBOX_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';
import { createHash } from 'node:crypto';
import { errorName, followUntil, getFromAny, HTTP_TIMEOUT_MS, postWithFailover, repostAfter, rotated, sleep, unlessBusy } from './agent-kit.js';
import type { Rng } from './prng.js';

/**
 * Simulated agents' MCP services ("connectors"), speaking the bridge protocol over HTTP as real ones
 * do: fresh request_ids, identical-content groups, edits with increasing seq, re-POSTs of the same
 * request after `unknown`/`failed` and blind ones (network-retry style), and failover to another
 * `serve` when theirs is down. Every request they make is tracked in the ledger the verdict reads.
 */

export type Kind = 'post' | 'dm' | 'edit' | 'reaction' | 'delete';

/** The protocol's DeliveryState, as far as the campaign reads it. */
export interface StateJson {
  state: 'pending' | 'unknown' | 'delivered' | 'failed';
  kind: Kind;
  url?: string;
  message_ref?: string;
  applied?: boolean;
  code?: string;
}

/** One delivery as its connector knows it. */
export interface Tracked {
  requestId: string;
  phase: string;
  connector: number;
  kind: Kind;
  /** The exact POST body; every re-POST sends it again. */
  payload: Record<string, unknown>;
  content: string;
  destination?: string;
  /** Identical-content group: the same content and target under several request_ids. */
  group?: string;
  /** Edits: the original's request_id and this edit's seq. */
  original?: string;
  seq?: number;
  /** Reactions: the emoji (unique per original, so each request owns one reaction on it). */
  emoji?: string;
  /** Posts and DMs with files: what the message must carry (filename and byte size, in order). */
  attachments?: { file: string; filename: string; size: number }[];
  /** Originals: the request_id of the delete asked for it. */
  deletedBy?: string;
  /** Originals: the next seq to use, and the edits made of it. */
  nextSeq: number;
  edits: string[];
  /** ms since the phase began. */
  createdAt: number;
  /** A 202 was seen for it. */
  accepted: boolean;
  /** POSTs made, counting ones that got no answer. */
  posts: number;
  failedReposts: number;
  /** The connector took a `failed` as final. */
  gaveUp: boolean;
  last: StateJson | undefined;
  lastCheck: number;
  /** Re-POSTs after `unknown`, and when the next may go (a connector backs off: 0.5 s doubling to 8 s). */
  unknownReposts: number;
  nextUnknownRepost: number;
  /** A POST of it is under way (one at a time, as a connector's retry loop does). */
  busy: boolean;
  /** The bridge forgot a request after answering 202 for it. */
  vanished: string | undefined;
  /** The first url it was reported delivered with; a delivered delivery must keep it. */
  deliveredUrl: string | undefined;
  /** It was reported delivered, and later something else (another state, or another url). */
  regressed: string | undefined;
  timeline: string[];
}

export interface ConnectorStats {
  posts: number;
  accepted: number;
  reposts: number;
  blindReposts: number;
  gets: number;
  /** Connection errors and timeouts. */
  networkErrors: number;
  /** 5xx answers (the server's database down, or it is stopping). */
  serverErrors: number;
  /** Answers a correct connector should never get (4xx on a valid request). */
  protocolErrors: string[];
  /** File uploads answered (POST /mcp/files), tries made again after no answer or a 5xx, and uploads given up. */
  uploads?: number;
  uploadRetries?: number;
  uploadsGivenUp?: number;
}

export function newStats(): ConnectorStats {
  return { posts: 0, accepted: 0, reposts: 0, blindReposts: 0, gets: 0, networkErrors: 0, serverErrors: 0, protocolErrors: [] };
}

export interface ConnectorContext {
  phase: string;
  t0: number;
  bridgeToken: string;
  /** The `serve` processes up now. */
  servers(): string[];
  ledger: Map<string, Tracked>;
  stats: ConnectorStats;
  log(line: string): void;
  /** A `failed` is re-POSTed at most this many times per delivery. */
  maxFailedReposts: number;
  /** What a connector does and how often (default: every action, as a busy agent does). */
  actions?: readonly (readonly [Action, number])[];
  /** The pause between two actions, ms (default 150..700). */
  pauseMs?: readonly [number, number];
  /** The headers naming who a connector's agent is (the policy binds it to an identity); none: the connector itself. */
  agentOf?: (connector: number) => Record<string, string>;
  /** The guild a connector posts to (default: the sandbox's), e.g. one whose destinations are its identity's channels. */
  guildOf?: (connector: number) => string;
}

export type Action = 'post' | 'group' | 'dm' | 'edit' | 'blind-repost' | 'unmapped' | 'react' | 'file-post' | 'file-dm' | 'delete';

/**
 * The default-window phase's actions: the defaults, reactions on delivered posts and DMs, posts and
 * DMs with files (uploaded first), and deletes of delivered posts and DMs.
 */
export const REACTING_ACTIONS: readonly (readonly [Action, number])[] = [
  ['post', 40],
  ['group', 12],
  ['dm', 14],
  ['edit', 16],
  ['blind-repost', 10],
  ['unmapped', 2],
  ['react', 12],
  ['file-post', 12],
  ['file-dm', 5],
  ['delete', 6],
];

/** Bytes several connectors upload alike (same bytes, same file id): four of them, 1–4 KB. */
const SHARED_FILES = 4;

/** `size` bytes derived from `seed` (SHA-256 in counter mode): the same seed, the same bytes. */
export function fileBytes(seed: string, size: number): Buffer {
  const blocks: Buffer[] = [];
  for (let i = 0; blocks.length * 32 < size; i++) blocks.push(createHash('sha256').update(`${seed}/${i}`).digest());
  return Buffer.concat(blocks).subarray(0, size);
}

/** Emoji a connector reacts with: each reaction on one original gets its own. */
const REACTION_EMOJI = ['👍', '✅', '👀', '🎉', '🔥', '🚀', '🙏', '❤️'] as const;

const DEFAULT_ACTIONS: readonly (readonly [Action, number])[] = [
  ['post', 40],
  ['group', 12],
  ['dm', 14],
  ['edit', 16],
  ['blind-repost', 10],
  ['unmapped', 2],
];

const POSTABLE = ['alerts', 'deals', 'digest'] as const;
/** Not mapped to a channel: such posts fail UPSTREAM_UNAVAILABLE without a Discord call. */
export const UNMAPPED_DESTINATION = 'ops';


export class Connector {
  private readonly plan: Rng;
  private readonly net: Rng;
  private readonly policy: Rng;
  private count = 0;
  private readonly mine: Tracked[] = [];

  constructor(
    readonly id: number,
    rng: Rng,
    private readonly ctx: ConnectorContext,
  ) {
    // Separate streams: what the connector does (plan) does not shift with how often its network fails.
    this.plan = rng.fork(`connector-${id}/plan`);
    this.net = rng.fork(`connector-${id}/net`);
    this.policy = rng.fork(`connector-${id}/policy`);
  }

  private now(): number {
    return Date.now() - this.ctx.t0;
  }

  private note(t: Tracked, event: string): void {
    // The first 20 events and the last 40.
    if (t.timeline.length >= 60) t.timeline.splice(20, 1, '…');
    t.timeline.push(`${(this.now() / 1000).toFixed(2)}s ${event}`);
  }

  /** Act until `running()` turns false: one action, then a pause, again. */
  async act(running: () => boolean): Promise<void> {
    while (running()) {
      const action = this.plan.weighted(this.ctx.actions ?? DEFAULT_ACTIONS);
      try {
        await this.perform(action);
      } catch (err) {
        this.ctx.log(`  connector ${this.id}: ${action} threw ${String(err)}`);
      }
      const [min, max] = this.ctx.pauseMs ?? [150, 700];
      await sleep(this.plan.int(min, max));
    }
  }

  private async perform(action: Action): Promise<void> {
    switch (action) {
      case 'post': {
        const destination = this.plan.pick(POSTABLE);
        const t = this.track('post', this.postPayload(destination, this.uniqueContent('post')), { destination });
        await this.submit(t, 'first POST');
        return;
      }
      case 'unmapped': {
        const t = this.track('post', this.postPayload(UNMAPPED_DESTINATION, this.uniqueContent('unmapped')), { destination: UNMAPPED_DESTINATION });
        await this.submit(t, 'first POST');
        return;
      }
      case 'group': {
        // The same content and target under several request_ids, sent at nearly the same time: only
        // the nonce (from the request_id) tells their messages apart.
        const destination = this.plan.pick(POSTABLE);
        const size = this.plan.int(2, 4);
        const group = `g${this.id}-${++this.count}`;
        const content = `chaos ${this.ctx.phase} same text ${group}`;
        const members = Array.from({ length: size }, () => this.track('post', this.postPayload(destination, content), { destination, group }));
        await Promise.all(members.map((t) => this.submit(t, 'first POST (group)')));
        return;
      }
      case 'dm': {
        const t = this.track('dm', { kind: 'dm', target: { user_id: SANDBOX_IDS.user }, body: { content: this.uniqueContent('dm') } }, {});
        await this.submit(t, 'first POST');
        return;
      }
      case 'edit': {
        const pair = this.plan.chance(0.35);
        const reversed = this.plan.chance(0.5);
        const pickIndex = this.plan.next();
        const candidates = this.mine.filter((t) => (t.kind === 'post' || t.kind === 'dm') && t.last?.state === 'delivered' && t.edits.length < 8);
        const original = candidates[Math.floor(pickIndex * candidates.length)];
        if (original === undefined) return;
        const edits = Array.from({ length: pair ? 2 : 1 }, () => {
          const seq = original.nextSeq++;
          const t = this.track('edit', { kind: 'edit', target: { message_ref: original.requestId, seq }, body: { content: `chaos ${this.ctx.phase} edit of ${original.requestId.slice(0, 12)} seq ${seq}` } }, { original: original.requestId, seq });
          original.edits.push(t.requestId);
          return t;
        });
        // Two edits at once, sometimes the higher seq first: the lower one must end up not applied.
        const order = reversed ? [...edits].reverse() : edits;
        await Promise.all(order.map((t, i) => sleep(i * 20).then(() => this.submit(t, `first POST (seq ${t.seq})`))));
        return;
      }
      case 'react': {
        // A reaction on a delivered post or DM of this connector's, each with its own emoji: the
        // verdict counts exactly one reaction by Herald per delivered reaction.
        const pickIndex = this.plan.next();
        const candidates = this.mine.filter((t) => (t.kind === 'post' || t.kind === 'dm') && t.last?.state === 'delivered' && this.reactionsOn(t) < REACTION_EMOJI.length);
        const original = candidates[Math.floor(pickIndex * candidates.length)];
        if (original === undefined) return;
        const emoji = REACTION_EMOJI[this.reactionsOn(original)] ?? '👍';
        const t = this.track('reaction', { kind: 'reaction', target: { message_ref: original.requestId }, body: { emoji } }, { original: original.requestId, emoji });
        await this.submit(t, 'first POST');
        return;
      }
      case 'file-post':
      case 'file-dm': {
        // Upload first (retried until some `serve` takes it, as a connector would), then the delivery.
        const count = this.plan.int(1, 3);
        const n = ++this.count;
        const files = Array.from({ length: count }, (_, i) => {
          const shared = this.plan.chance(0.3);
          const k = this.plan.int(0, SHARED_FILES - 1);
          const seed = shared ? `chaos shared file ${k}` : `${this.ctx.phase} c${this.id}-${n}-${i} ${this.plan.hex(16)}`;
          const size = shared ? 1024 * (k + 1) : this.plan.int(512, 6 * 1024);
          return { bytes: fileBytes(seed, size), filename: `c${this.id}-${n}-${i}${shared ? `-shared${k}` : ''}.bin` };
        });
        const attachments: { file: string; filename: string; size: number }[] = [];
        for (const f of files) {
          const file = await this.upload(f.bytes, f.filename);
          if (file === undefined) return;
          attachments.push({ file, filename: f.filename, size: f.bytes.length });
        }
        const content = this.uniqueContent(action === 'file-post' ? 'post with files' : 'dm with files');
        const listed = attachments.map((a, i) => ({ file: a.file, filename: a.filename, ...(i === 0 && this.plan.chance(0.5) ? { description: `file ${a.filename}` } : {}) }));
        if (action === 'file-post') {
          const destination = this.plan.pick(POSTABLE);
          const payload = this.postPayload(destination, content);
          (payload['body'] as Record<string, unknown>)['attachments'] = listed;
          await this.submit(this.track('post', payload, { destination, attachments }), 'first POST (files)');
        } else {
          const t = this.track('dm', { kind: 'dm', target: { user_id: SANDBOX_IDS.user }, body: { content, attachments: listed } }, { attachments });
          await this.submit(t, 'first POST (files)');
        }
        return;
      }
      case 'delete': {
        // A delete of a delivered post or DM of this connector's, once per original; now and then an
        // edit of it at the same moment (either may win; the message must not come back).
        const pickIndex = this.plan.next();
        const racingEdit = this.plan.chance(0.3);
        const candidates = this.mine.filter((t) => (t.kind === 'post' || t.kind === 'dm') && t.last?.state === 'delivered' && t.deletedBy === undefined);
        const original = candidates[Math.floor(pickIndex * candidates.length)];
        if (original === undefined) return;
        const t = this.track('delete', { kind: 'delete', target: { message_ref: original.requestId } }, { original: original.requestId });
        original.deletedBy = t.requestId;
        const edit = racingEdit ? this.track('edit', { kind: 'edit', target: { message_ref: original.requestId, seq: original.nextSeq }, body: { content: `chaos ${this.ctx.phase} edit racing the delete of ${original.requestId.slice(0, 12)}` } }, { original: original.requestId, seq: original.nextSeq++ }) : undefined;
        if (edit !== undefined) original.edits.push(edit.requestId);
        await Promise.all([this.submit(t, 'first POST'), ...(edit !== undefined ? [this.submit(edit, 'first POST (racing a delete)')] : [])]);
        return;
      }
      case 'blind-repost': {
        // A network-level retry: the same request again, whatever its state.
        const recent = this.mine.slice(-30);
        const pickIndex = this.plan.next();
        const t = recent[Math.floor(pickIndex * recent.length)];
        if (t === undefined) return;
        this.ctx.stats.blindReposts += 1;
        await this.submit(t, 'blind re-POST');
        return;
      }
    }
  }

  private reactionsOn(original: Tracked): number {
    return this.mine.filter((t) => t.kind === 'reaction' && t.original === original.requestId).length;
  }

  private uniqueContent(what: string): string {
    return `chaos ${this.ctx.phase} ${what} c${this.id}-${++this.count}`;
  }

  private postPayload(destination: string, content: string): Record<string, unknown> {
    const body: Record<string, unknown> = { content };
    // Now and then a card and links too: reconciliation compares whole payloads, not only text.
    if (this.plan.chance(0.2)) {
      body['card'] = { title: content.slice(0, 60), color: this.plan.int(0, 0xffffff), fields: [{ name: 'n', value: String(this.count) }] };
      body['links'] = [{ label: 'runbook', url: 'https://example.com/runbook' }];
    }
    return { kind: 'post', target: { guild_id: this.ctx.guildOf?.(this.id) ?? SANDBOX_IDS.guild, destination }, body };
  }

  private agent(): Record<string, string> {
    return this.ctx.agentOf?.(this.id) ?? {};
  }

  private track(kind: Kind, payload: Record<string, unknown>, extra: Partial<Tracked>): Tracked {
    const requestId = this.plan.hex(64);
    const body = (payload['body'] ?? {}) as { content?: string; emoji?: string };
    const t: Tracked = {
      requestId,
      phase: this.ctx.phase,
      connector: this.id,
      kind,
      payload: { request_id: requestId, ...payload },
      content: body.content ?? (kind === 'delete' ? 'delete' : `reaction ${body.emoji ?? ''}`),
      nextSeq: 1,
      edits: [],
      createdAt: this.now(),
      accepted: false,
      posts: 0,
      failedReposts: 0,
      gaveUp: false,
      last: undefined,
      lastCheck: 0,
      unknownReposts: 0,
      nextUnknownRepost: 0,
      busy: false,
      vanished: undefined,
      deliveredUrl: undefined,
      regressed: undefined,
      timeline: [],
      ...extra,
    };
    this.ctx.ledger.set(requestId, t);
    this.mine.push(t);
    return t;
  }

  /**
   * Uploads `bytes` (POST /mcp/files, raw, `?filename=`) as a connector does: every `serve` in turn,
   * again with a growing pause while none answers or they answer 5xx (Herald restarting, its
   * database down); uploads are idempotent by content, so a retry is always safe. Answers the file id,
   * or undefined if it gave up (after about 40 s) or was refused.
   */
  private async upload(bytes: Buffer, filename: string): Promise<string | undefined> {
    const stats = this.ctx.stats;
    for (let round = 0; round < 15; round++) {
      if (round > 0) stats.uploadRetries = (stats.uploadRetries ?? 0) + 1;
      for (const server of this.servers()) {
        let res: Response;
        let text: string;
        try {
          res = await fetch(`${server}/mcp/files?filename=${encodeURIComponent(filename)}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${this.ctx.bridgeToken}`, ...this.agent(), 'content-type': 'application/octet-stream' },
            body: bytes,
            signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
          });
          text = await res.text();
        } catch (err) {
          stats.networkErrors += 1;
          this.ctx.log(`  connector ${this.id}: upload ${filename}: no answer (${errorName(err)})`);
          continue;
        }
        if (res.status >= 500) {
          stats.serverErrors += 1;
          continue;
        }
        const json = JSON.parse(text) as { file?: string; sha256?: string; size?: number };
        const sha = createHash('sha256').update(bytes).digest('hex');
        if ((res.status === 200 || res.status === 201) && json.file === sha && json.size === bytes.length) {
          stats.uploads = (stats.uploads ?? 0) + 1;
          return json.file;
        }
        stats.protocolErrors.push(`upload ${filename}: ${res.status} ${text.slice(0, 200)}`);
        return undefined;
      }
      await sleep(Math.min(500 * (round + 1), 4_000));
    }
    stats.uploadsGivenUp = (stats.uploadsGivenUp ?? 0) + 1;
    return undefined;
  }

  /** Servers in a random order: the connector's own first, the others as failover. */
  private servers(): string[] {
    return rotated(this.ctx.servers(), this.net);
  }

  /** POST the delivery (again), trying other servers when one is down; false if none answered. */
  async submit(t: Tracked, why: string): Promise<boolean> {
    return unlessBusy(t, false, () => this.submitNow(t, why));
  }

  private async submitNow(t: Tracked, why: string): Promise<boolean> {
    t.posts += 1;
    this.ctx.stats.posts += 1;
    if (t.accepted) this.ctx.stats.reposts += 1;
    const reply = await postWithFailover(() => this.servers(), '/mcp/deliveries', this.ctx.bridgeToken, t.payload, this.ctx.stats, (line) => this.note(t, line), why, 3, this.agent());
    if (reply === undefined) return false;
    if (reply.status === 202) {
      const answer = reply.json as { state: StateJson; existing: boolean };
      if (t.accepted && !answer.existing && t.vanished === undefined) t.vanished = `a re-POST was answered existing:false after an earlier 202 (${why})`;
      t.accepted = true;
      this.ctx.stats.accepted += 1;
      this.observe(t, answer.state, `${why}: 202 existing:${answer.existing}`);
      return true;
    }
    this.ctx.stats.protocolErrors.push(`POST ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
    this.note(t, `${why}: ${reply.status} ${JSON.stringify(reply.json)}`);
    return false;
  }

  private observe(t: Tracked, state: StateJson, how: string): void {
    if (t.deliveredUrl !== undefined && t.regressed === undefined && (state.state !== 'delivered' || state.url !== t.deliveredUrl)) {
      t.regressed = `reported delivered at ${t.deliveredUrl}, later ${state.state}${state.url !== undefined ? ` at ${state.url}` : ''} (${how})`;
    }
    if (state.state === 'delivered') t.deliveredUrl ??= state.url;
    const changed = t.last?.state !== state.state;
    t.last = state;
    if (changed) this.note(t, `${how} → ${state.state}${state.code ? ` ${state.code}` : ''}${state.url ? ` ${state.url}` : ''}`);
  }

  /** Whether this connector is done with the delivery. */
  static settled(t: Tracked): boolean {
    return t.last?.state === 'delivered' || (t.last?.state === 'failed' && t.gaveUp);
  }

  /**
   * Look at every delivery not settled yet and act as a connector would: re-POST on `unknown`, on
   * `failed` (up to maxFailedReposts times) and when the bridge never acknowledged it.
   */
  async followUp(running: () => boolean): Promise<void> {
    await followUntil(this.mine, (t) => Connector.settled(t), 300, running, (t) => this.check(t));
  }

  private async check(t: Tracked): Promise<void> {
    // Only a 202 seen before this GET was sent makes a 404 mean the bridge forgot it.
    const acceptedBefore = t.accepted;
    const reply = await getFromAny(this.servers(), `/mcp/deliveries/${t.requestId}`, this.ctx.bridgeToken, this.ctx.stats, this.agent());
    if (reply === undefined) return;
    if (reply.status === 404) {
      if (acceptedBefore && t.vanished === undefined) t.vanished = 'GET answered 404 unknown request_id after a 202';
      // Never acknowledged (every POST lost to a dead server or a down database): send it again.
      await this.submit(t, 're-POST (never acknowledged)');
      return;
    }
    if (reply.status !== 200) {
      this.ctx.stats.protocolErrors.push(`GET ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
      return;
    }
    const state = reply.json as StateJson;
    this.observe(t, state, 'GET');
    await repostAfter(t, state, this.ctx.maxFailedReposts, this.policy, (why) => this.submit(t, why), (line) => this.note(t, line));
  }
}
