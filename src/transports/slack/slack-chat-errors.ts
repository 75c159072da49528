import { ErrorCode, type WebAPICallError } from '@slack/web-api';
import { TransportError, type TransportFailure } from '../transport.js';

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
