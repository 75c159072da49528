import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { LeaseLostError } from '../../infra/faults/fence.js';
import { TransportError } from '../platform.js';
import type { PlatformMetrics } from './discord.metrics.js';

// One call to Discord: counted by status, and its errors translated into what the dispatcher acts on.

/** Discord's "Cannot send messages to this user". */
const CANNOT_MESSAGE_USER = 50007;

/** One HTTP request to Discord, counted by status (and a 429 by its scope). */
export async function measured<R extends { status: number; headers: { get(name: string): string | null } }>(metrics: PlatformMetrics | undefined, method: string, request: () => Promise<R>): Promise<R> {
  if (metrics === undefined) return request();
  const started = performance.now();
  try {
    const res = await request();
    metrics.response('discord', method, res.status, (performance.now() - started) / 1000, res.headers.get('x-ratelimit-scope'));
    return res;
  } catch (err) {
    metrics.response('discord', method, 'error', (performance.now() - started) / 1000);
    throw err;
  }
}

/** Run a discord.js call, translating its errors into what the dispatcher acts on. */
export async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    // Held back by its fence (src/infra/faults/fence.ts): nothing left; the job stops as it is.
    if (err instanceof LeaseLostError) throw err;
    throw toTransportError(err);
  }
}

/** What discord.js throws for a request of a REST client whose token it wiped after a 401. */
export const TOKEN_FORGOTTEN = /^Expected token to be set for this request, but none was present/;

export function toTransportError(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  if (err instanceof RateLimitError) {
    return new TransportError({ kind: 'transient', retryAfterMs: err.retryAfter, detail: `rate limited on ${err.route} for ${err.retryAfter} ms` });
  }
  if (err instanceof DiscordAPIError) {
    const where = `${err.method.toUpperCase()} ${new URL(err.url).pathname}`;
    const detail = `discord ${err.status} code ${err.code} on ${where}`;
    if (err.status === 429 || err.status >= 500) return new TransportError({ kind: 'transient', detail });
    if (err.code === CANNOT_MESSAGE_USER) return new TransportError({ kind: 'recipient_unreachable', detail });
    if (err.status === 404) return new TransportError({ kind: 'not_found', detail });
    return new TransportError({ kind: 'rejected', detail });
  }
  // discord.js forgot the token after Discord refused it (a 401 on an earlier request): nothing leaves.
  if (err instanceof Error && TOKEN_FORGOTTEN.test(err.message)) {
    return new TransportError({ kind: 'rejected', detail: 'discord rejected this bot token (401): nothing is sent as it until Herald restarts with a valid token' });
  }
  if (err instanceof HTTPError) {
    return new TransportError({ kind: 'transient', detail: `discord http ${err.status} on ${err.method.toUpperCase()} ${new URL(err.url).pathname}` });
  }
  // Network errors, timeouts and aborts: the request may or may not have reached Discord.
  const name = err instanceof Error ? err.name : 'Error';
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  return new TransportError({ kind: 'transient', detail: `discord unreachable (${name}${code ? ` ${code}` : ''})` });
}
