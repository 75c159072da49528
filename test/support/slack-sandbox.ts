import { LogLevel, WebClient, type WebAPICallResult } from '@slack/web-api';
import type { SlackSandbox } from '../../src/platforms/slack/sandbox/sandbox.js';

/** Slack's own Web API client against the sandbox, never retrying (as Herald's creates must not be). */
export function webClient(sandbox: SlackSandbox, token = sandbox.botToken): WebClient {
  return new WebClient(token, { slackApiUrl: sandbox.apiUrl, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true, logLevel: LogLevel.ERROR });
}

/** The Slack error code a call failed with (a platform error's `error`), or the client's error code. */
export async function failure(call: Promise<WebAPICallResult>): Promise<{ code: string; error?: string; retryAfter?: number; statusCode?: number }> {
  try {
    await call;
  } catch (err) {
    const e = err as { code: string; data?: { error?: string }; retryAfter?: number; statusCode?: number };
    return { code: e.code, ...(e.data?.error === undefined ? {} : { error: e.data.error }), ...(e.retryAfter === undefined ? {} : { retryAfter: e.retryAfter }), ...(e.statusCode === undefined ? {} : { statusCode: e.statusCode }) };
  }
  throw new Error('the call succeeded');
}

/** Herald's message metadata for a send key. */
export const herald = (key: string) => ({ event_type: 'herald_delivery', event_payload: { id: key } });


/** The sandbox's answer to one Web API call with `token`, as JSON over HTTP (`{"ok":…}`, whatever it says). */
export async function apiCall(sandbox: SlackSandbox, token: string, method: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${sandbox.apiUrl}${method}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return (await res.json()) as Record<string, unknown>;
}
