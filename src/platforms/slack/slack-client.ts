import { LogLevel, WebAPIHTTPError, WebAPIPlatformError, WebAPIRateLimitedError, WebAPIRequestError, WebClient, type FetchFunction, type Logger as SlackLogger, type WebAPICallResult } from '@slack/web-api';
import { TransportError, type SendDeadline, type TransportFailure } from '../platform.js';
import { beforeLeaving } from '../../infra/faults/fence.js';
import { oneWrite } from './one-write.js';

/** What waits for a request's turn in Slack's budgets (called before each request leaves). */
export type Pace = (method: string, args: Readonly<Record<string, unknown>>, signal: AbortSignal | undefined) => Promise<void>;

export interface SlackApiOptions {
  token: string;
  /** Base of the Web API, ending with `/` (https://slack.com/api/). */
  apiUrl: string;
  timeoutMs: number;
  pace?: Pace;
}

/** One call's options. */
export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** A create: not sent past this deadline (see `SendDeadline`). */
  deadline?: SendDeadline | undefined;
}

/** What a call learned about itself: whether its request left (so a create may have happened). */
interface Departure {
  departed: boolean;
  /** The fence's refusal, when the request was held back by it. */
  fenced?: unknown;
}

/**
 * Slack's Web API through @slack/web-api's WebClient, one client per call so each call carries its
 * own abort signal, pacing and "did the request leave" record. The client never retries and never
 * sits out a 429 itself: a create that may have reached Slack must not be repeated blindly (Slack
 * has no idempotency key), and a rate limit reschedules the job rather than holding its lease.
 */
export class SlackApi {
  /** Slack's refusal of the token itself (invalid_auth, token_revoked, …), once a call got one. */
  tokenRefused: string | undefined;

  constructor(private readonly options: SlackApiOptions) {}

  /** Call `method`; Slack's refusals, HTTP errors and network errors become TransportErrors. */
  async call<T extends WebAPICallResult = WebAPICallResult>(method: string, args: Record<string, unknown>, options: CallOptions = {}): Promise<T> {
    const departure: Departure = { departed: false };
    // The turn in the rate budget is waited for before the client starts its call: the client's
    // timeout starts with the call, and must measure the request, not the wait before it.
    const { signal } = options;
    if (signal?.aborted === true) throw slackError(new NotSentError('aborted before it left'), method, false);
    try {
      await this.options.pace?.(method, args, signal);
    } catch {
      throw slackError(new NotSentError('aborted while waiting for its turn in the rate budget'), method, false);
    }
    const client = new WebClient(this.options.token, {
      slackApiUrl: this.options.apiUrl,
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: this.options.timeoutMs,
      allowAbsoluteUrls: false,
      // Slack's client logs request bodies at debug: message content never reaches Herald's logs.
      logger: SILENT,
      logLevel: LogLevel.ERROR,
      fetch: this.fetchFor(options, departure),
    });
    try {
      return (await client.apiCall(method, args)) as T;
    } catch (err) {
      // Held back by its fence: nothing left, and the job stops as it is (the client wraps the error).
      if (departure.fenced !== undefined) throw departure.fenced;
      const failed = slackError(err, method, departure.departed);
      const code = slackErrorCode(failed);
      if (code !== undefined && TOKEN_REFUSED.has(code)) this.tokenRefused = code;
      throw failed;
    }
  }

  private fetchFor(options: CallOptions, departure: Departure): FetchFunction {
    return async (url, init) => {
      const { signal, deadline } = options;
      const signals = [init?.signal, signal].filter((s): s is AbortSignal => s !== undefined);
      // Aborted (or timed out) before it left: nothing was sent.
      if (signals.some((s) => s.aborted)) throw new NotSentError('aborted before it left');
      const combined = signals.length > 0 ? AbortSignal.any(signals) : undefined;
      // The last moment before the request leaves (after the rate budget, on a connected socket).
      const lastCheck = (): void => {
        // Every request of a job leaves only while its lease holds (src/infra/faults/fence.ts).
        try {
          beforeLeaving();
        } catch (err) {
          departure.fenced = err;
          throw err;
        }
        // Past its deadline a create stays home.
        if (deadline !== undefined && Date.now() > deadline.notAfter.getTime()) throw new DepartedLateError();
        if (combined?.aborted === true) throw new NotSentError('aborted before it left');
      };
      const leaving = (): void => {
        departure.departed = true;
      };
      // Every Web API call's body is a form-encoded string: it leaves in one write (./one-write.ts).
      // Anything else (a file's bytes) goes through fetch, after the same checks.
      const body = init?.body;
      if (typeof body === 'string') {
        return oneWrite(new URL(String(url)), { method: init?.method ?? 'POST', headers: headersOf(init?.headers), body, signal: combined }, lastCheck, leaving);
      }
      lastCheck();
      leaving();
      return fetch(url, { ...(init ?? {}), ...(combined !== undefined ? { signal: combined } : {}) } as RequestInit);
    };
  }
}

/** A fetch call's headers as a plain record. */
function headersOf(headers: unknown): Record<string, string> {
  if (headers === undefined || headers === null) return {};
  return Object.fromEntries(new Headers(headers as ConstructorParameters<typeof Headers>[0]).entries());
}

/** A request held back past its deadline, before it left. */
export class DepartedLateError extends Error {
  constructor() {
    super('create abandoned before it left: past its deadline');
    this.name = 'DepartedLateError';
  }
}

/** A request that never left (aborted before or while waiting for its turn). */
class NotSentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotSentError';
  }
}

/** Slack's answers that mean the token itself is refused. */
export const TOKEN_REFUSED: ReadonlySet<string> = new Set(['invalid_auth', 'not_authed', 'token_revoked', 'token_expired', 'account_inactive', 'not_allowed_token_type']);
/** Slack's answers that say nothing was done, only that it could not be now (retry later). */
const TRANSIENT = new Set(['ratelimited', 'rate_limited', 'service_unavailable', 'team_added_to_org', 'internal_error', 'fatal_error', 'request_timeout']);
/** Of those, the ones where Slack says part of the operation may have happened. */
const MAY_HAVE_HAPPENED = new Set(['internal_error', 'fatal_error', 'request_timeout']);
/** What does not exist, or is not visible to the bot. */
const NOT_FOUND = new Set(['channel_not_found', 'message_not_found', 'thread_not_found']);
/** A person Herald cannot message. */
const UNREACHABLE = new Set(['user_not_found', 'user_not_visible', 'user_disabled', 'cannot_dm_bot', 'messages_tab_disabled']);
/** Network errors raised before any byte of the request left: nothing reached Slack. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** The error code Slack answered (`channel_not_found`), when it answered one. */
export function slackErrorCode(err: unknown): string | undefined {
  return err instanceof TransportError ? /^slack ([a-z_]+) on /.exec(err.failure.detail)?.[1] : undefined;
}

/**
 * What a failed call means to the outbox. `departed`: the request left, so a create may have
 * happened unless Slack answered that it did nothing (a refusal, a 429).
 */
export function slackError(err: unknown, method: string, departed: boolean): TransportError {
  if (err instanceof TransportError) return err;
  return new TransportError(slackFailure(err, method, departed));
}

function slackFailure(err: unknown, method: string, departed: boolean): TransportFailure {
  if (err instanceof WebAPIRateLimitedError) {
    return { kind: 'transient', retryAfterMs: err.retryAfter * 1000, detail: `slack rate limited on ${method} for ${err.retryAfter} s` };
  }
  if (err instanceof WebAPIPlatformError) {
    const code = String(err.data.error);
    const detail = `slack ${code} on ${method}`;
    if (TRANSIENT.has(code)) return { kind: 'transient', detail, ...(departed && MAY_HAVE_HAPPENED.has(code) ? { mayHaveCreated: true } : {}) };
    if (NOT_FOUND.has(code)) return { kind: 'not_found', detail };
    if (UNREACHABLE.has(code)) return { kind: 'recipient_unreachable', detail };
    return { kind: 'rejected', detail };
  }
  if (err instanceof WebAPIHTTPError) {
    const detail = `slack http ${err.statusCode} on ${method}`;
    // Slack answers 200 or 429; anything else is a proxy or an outage, which may have passed the request on.
    if (err.statusCode >= 500 || err.statusCode === 408) return { kind: 'transient', detail, ...(departed ? { mayHaveCreated: true } : {}) };
    return { kind: 'rejected', detail };
  }
  const cause = err instanceof WebAPIRequestError ? err.original : err;
  if (cause instanceof DepartedLateError) return { kind: 'transient', detail: cause.message, departedLate: true };
  if (cause instanceof NotSentError) return { kind: 'transient', detail: `slack request to ${method} not sent: ${cause.message}` };
  // Network errors, timeouts and aborts: the request may or may not have reached Slack.
  const code = networkCode(cause);
  const name = cause instanceof Error ? cause.name : 'Error';
  const detail = `slack unreachable on ${method} (${name}${code !== undefined ? ` ${code}` : ''})`;
  return { kind: 'transient', detail, ...(departed && (code === undefined || !NOT_CONNECTED.has(code)) ? { mayHaveCreated: true } : {}) };
}

/** The system error code of a network failure (fetch wraps it in `cause`). */
function networkCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; typeof e === 'object' && e !== null && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
  }
  return undefined;
}

export const SILENT: SlackLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  setLevel: () => undefined,
  getLevel: () => LogLevel.ERROR,
  setName: () => undefined,
};
