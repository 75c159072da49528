import { ErrorCode, type WebAPICallError, type WebAPICallResult, type WebClient } from '@slack/web-api';
import { TransportError, type SendDeadline, type TransportFailure } from '../platform.js';

/** Slack's error codes for a channel or user that does not exist or cannot be seen. */
const NOT_FOUND = new Set(['channel_not_found', 'user_not_found', 'message_not_found', 'users_not_found']);
/** The channel exists but Herald cannot post or read there as it is. */
const UNREACHABLE = new Set(['not_in_channel', 'is_archived', 'channel_is_archived', 'restricted_action', 'restricted_action_read_only_channel', 'team_access_not_granted']);
/** Slack's own trouble: answered, but nothing is promised about what happened. */
const SLACK_TROUBLE = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout', 'ratelimited']);

function isSlackError(err: unknown): err is WebAPICallError {
  const code = (err as { code?: unknown } | null)?.code;
  return code === ErrorCode.PlatformError || code === ErrorCode.HTTPError || code === ErrorCode.RequestError || code === ErrorCode.RateLimitedError;
}

/**
 * A @slack/web-api failure in the terms the outbox acts on. `create`: the call creates something
 * (chat.postMessage), so a failure after the request went out may have created it.
 */
export function slackFailure(err: unknown, method: string, create: boolean): TransportFailure | undefined {
  if (err instanceof TransportError) return err.failure;
  if (!isSlackError(err)) return undefined;
  switch (err.code) {
    case ErrorCode.RateLimitedError:
      // Slack refused before doing anything: nothing was created.
      return { kind: 'transient', retryAfterMs: Math.max(1, err.retryAfter) * 1000, detail: `Slack rate-limited ${method}` };
    case ErrorCode.RequestError:
      return { kind: 'transient', detail: `Slack did not answer ${method}: ${err.original.message}`, ...(create ? { mayHaveCreated: true } : {}) };
    case ErrorCode.HTTPError:
      if (err.statusCode === 429 || err.statusCode >= 500) return { kind: 'transient', detail: `Slack answered ${method} with HTTP ${err.statusCode}`, ...(create && err.statusCode !== 429 ? { mayHaveCreated: true } : {}) };
      return { kind: 'rejected', detail: `Slack answered ${method} with HTTP ${err.statusCode}` };
    case ErrorCode.PlatformError: {
      const code = err.data.error;
      if (NOT_FOUND.has(code)) return { kind: 'not_found', detail: `Slack: ${code}` };
      if (UNREACHABLE.has(code)) return { kind: 'recipient_unreachable', detail: `Slack: ${code}` };
      // An `ok:false` answer is Slack's decision: nothing was created, except where it had trouble.
      if (SLACK_TROUBLE.has(code)) return { kind: 'transient', detail: `Slack: ${code}`, ...(create && code !== 'ratelimited' ? { mayHaveCreated: true } : {}) };
      return { kind: 'rejected', detail: `Slack refused ${method}: ${code}` };
    }
  }
  return undefined;
}

/** The Slack error code of an `ok:false` answer, or undefined for any other failure. */
export function slackErrorCode(err: unknown): string | undefined {
  return isSlackError(err) && err.code === ErrorCode.PlatformError ? err.data.error : undefined;
}

/** Run a Web API call, its failure mapped to a TransportError (other errors pass unchanged). */
export async function slackCall<T>(method: string, fn: () => Promise<T>, create = false): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const failure = slackFailure(err, method, create);
    if (failure === undefined) throw err;
    throw new TransportError(failure);
  }
}

/** One call's options: its abort signal, and for a create the deadline it may not leave after. */
export interface SlackCallOptions {
  signal?: AbortSignal | undefined;
  deadline?: SendDeadline | undefined;
}

/**
 * A Web API caller whose failures are TransportErrors already, naming Slack's error code in their
 * detail (the transport's own paced client: `call(method, args, { signal, deadline })`).
 */
export interface SlackCaller {
  call(method: string, args: Record<string, unknown>, options?: SlackCallOptions): Promise<WebAPICallResult>;
}

/** What the chat facet and Socket Mode call Slack with: a plain WebClient, or a SlackCaller. */
export type SlackClient = WebClient | SlackCaller;

/** Call a Web API method through either kind of client, failures as TransportErrors. */
export type SlackCall = <T extends WebAPICallResult>(method: string, args: Record<string, unknown>, options?: SlackCallOptions) => Promise<T>;

export function slackCallerOf(client: SlackClient): SlackCall {
  if ('apiCall' in client) {
    // A WebClient takes no signal or deadline per call: both are checked just before it is called.
    return async <T extends WebAPICallResult>(method: string, args: Record<string, unknown>, options: SlackCallOptions = {}) => {
      options.signal?.throwIfAborted();
      if (options.deadline !== undefined && Date.now() > options.deadline.notAfter.getTime()) {
        throw new TransportError({ kind: 'transient', detail: `${method} would leave after its deadline`, departedLate: true });
      }
      return (await slackCall(method, () => client.apiCall(method, args), CREATES.has(method))) as T;
    };
  }
  return async <T extends WebAPICallResult>(method: string, args: Record<string, unknown>, options: SlackCallOptions = {}) => (await client.call(method, args, options)) as T;
}

/** The methods Herald calls that create something Slack has no idempotency key for. */
const CREATES = new Set(['chat.postMessage']);

/** Whether a failure is Slack's error `code` (an `ok:false` answer), from either kind of client. */
export function isSlackCode(err: unknown, code: string): boolean {
  if (err instanceof TransportError) return new RegExp(`(^|[^a-z_])${code}([^a-z_]|$)`).test(err.failure.detail);
  return slackErrorCode(err) === code;
}
