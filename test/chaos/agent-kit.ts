import type { Rng } from './prng.js';

/**
 * What the campaign's connectors and agents (connector.ts, discord-chat-connector.ts,
 * irc-connector.ts, handoff-agents.ts) do the same way on the wire: a bearer-token JSON request,
 * a POST tried on every `serve` (a few rounds) until one answers, a GET answered by the first
 * `serve` that can, and the loop that looks again at what is still open. What a reply means, and
 * what to do next, stays with each connector.
 */

export const HTTP_TIMEOUT_MS = 4_000;

export interface Reply {
  status: number;
  json: unknown;
}

/** The counters every connector keeps of what the network and the servers answered. */
export interface WireStats {
  gets: number;
  networkErrors: number;
  serverErrors: number;
}

export async function request(base: string, method: string, path: string, token: string, body?: unknown, timeoutMs = HTTP_TIMEOUT_MS, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

/** Servers in a random order (the agent's own first, the others as failover). */
export function rotated(all: readonly string[], rng: Rng): string[] {
  if (all.length === 0) return [];
  const k = rng.int(0, all.length - 1);
  return [...all.slice(k), ...all.slice(0, k)];
}

/**
 * POSTs `body` to each server in turn (`servers()` asked again each round), up to `rounds` rounds
 * with a growing pause between them: a network error or a 5xx is counted, noted and the next
 * server tried. Answers the first other reply (the caller reads it), or undefined if none came.
 */
export async function postWithFailover(
  servers: () => string[],
  path: string,
  token: string,
  body: unknown,
  stats: WireStats,
  note: (line: string) => void,
  why: string,
  rounds = 3,
  headers: Record<string, string> = {},
): Promise<Reply | undefined> {
  for (let round = 0; round < rounds; round++) {
    for (const server of servers()) {
      let reply: Reply;
      try {
        reply = await request(server, 'POST', path, token, body, HTTP_TIMEOUT_MS, headers);
      } catch (err) {
        stats.networkErrors += 1;
        note(`${why}: no answer (${errorName(err)})`);
        continue;
      }
      if (reply.status >= 500) {
        stats.serverErrors += 1;
        note(`${why}: ${reply.status}`);
        continue;
      }
      return reply;
    }
    await sleep(150 * (round + 1));
  }
  return undefined;
}

/** GET from the first of `servers` that answers other than a network error or a 5xx (each counted); undefined if none did. */
export async function getFromAny(servers: readonly string[], path: string, token: string, stats: WireStats, headers: Record<string, string> = {}): Promise<Reply | undefined> {
  for (const server of servers) {
    let reply: Reply;
    try {
      stats.gets += 1;
      reply = await request(server, 'GET', path, token, undefined, HTTP_TIMEOUT_MS, headers);
    } catch {
      stats.networkErrors += 1;
      continue;
    }
    if (reply.status >= 500) {
      stats.serverErrors += 1;
      continue;
    }
    return reply;
  }
  return undefined;
}

/** Something a connector follows: busy while a request of its own is under way, and when it was last looked at. */
export interface Followed {
  busy: boolean;
  lastCheck: number;
}

/** Runs `fn` for `t` unless it is busy already (then answers `idle`); `t` is busy meanwhile. */
export async function unlessBusy<R>(t: Followed, idle: R, fn: () => Promise<R>): Promise<R> {
  if (t.busy) return idle;
  t.busy = true;
  try {
    return await fn();
  } finally {
    t.busy = false;
  }
}

/**
 * One pass over `items`: each not settled, not busy and not looked at for `everyMs` is checked in
 * turn. Answers false when `running()` turned false midway.
 */
export async function checkDue<T extends Followed>(items: readonly T[], settled: (t: T) => boolean, everyMs: number, running: () => boolean, check: (t: T) => Promise<void>): Promise<boolean> {
  const due = items.filter((t) => !settled(t) && !t.busy && Date.now() - t.lastCheck >= everyMs);
  for (const t of due) {
    if (!running()) return false;
    t.lastCheck = Date.now();
    await check(t);
  }
  return true;
}

/** Checks what is due (see checkDue) about five times a second until `running()` turns false. */
export async function followUntil<T extends Followed>(items: readonly T[], settled: (t: T) => boolean, everyMs: number, running: () => boolean, check: (t: T) => Promise<void>): Promise<void> {
  while (running()) {
    if (!(await checkDue(items, settled, everyMs, running, check))) return;
    await sleep(200);
  }
}

/** What a connector following a delivery-like request (a delivery, a handoff) keeps to decide on re-POSTs. */
export interface Reposting {
  unknownReposts: number;
  nextUnknownRepost: number;
  failedReposts: number;
  gaveUp: boolean;
}

/**
 * After a GET answered `state`: re-POST on `unknown` (backing off, 0.5 s doubling to 8 s), and on
 * `failed` up to `maxFailedReposts` times, each with a chance of 3 in 4 (`policy` decides); else
 * give up, `failed` being final.
 */
export async function repostAfter(t: Reposting, state: { state: string; code?: string | undefined }, maxFailedReposts: number, policy: Rng, submit: (why: string) => Promise<unknown>, note: (line: string) => void): Promise<void> {
  if (state.state === 'unknown') {
    if (Date.now() < t.nextUnknownRepost) return;
    t.unknownReposts += 1;
    t.nextUnknownRepost = Date.now() + Math.min(8_000, 500 * 2 ** (t.unknownReposts - 1));
    await submit('re-POST after unknown');
  } else if (state.state === 'failed' && !t.gaveUp) {
    if (t.failedReposts < maxFailedReposts && policy.chance(0.75)) {
      t.failedReposts += 1;
      await submit(`re-POST after failed ${state.code ?? ''}`.trim());
    } else {
      t.gaveUp = true;
      note('gave up: failed is final');
    }
  }
}

export function errorName(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as Error & { cause?: { code?: string } }).cause;
    return cause?.code ?? err.name;
  }
  return String(err);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
