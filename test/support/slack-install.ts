import { expect } from 'vitest';
import type { SlackSandbox } from '../../src/platforms/slack/sandbox/sandbox.js';
import type { TestHerald } from './herald.js';

// Slack's OAuth install from Herald (src/platforms/slack/slack-install.ts), driven as an operator's
// browser drives it against the Slack sandbox: the tests of test/slack-install*.test.ts and
// test/slack-token-rotation.test.ts share these steps.

/**
 * A Herald's variables for Slack against `slack`, with the identities `installs` declared
 * `name=install` (the sandbox's client, the credentials key `key`), and `extra` on top.
 */
export function installEnv(slack: SlackSandbox, installs: string, key: Buffer, extra: Record<string, string> = {}): Record<string, string> {
  return {
    SLACK_BOT_TOKEN: slack.botToken,
    SLACK_API_URL: slack.apiUrl,
    HERALD_SLACK_TIMEOUT_MS: '3000',
    HERALD_SLACK_IDENTITIES: installs,
    SLACK_CLIENT_ID: slack.clientId,
    SLACK_CLIENT_SECRET: slack.clientSecret,
    HERALD_CREDENTIALS_KEY: key.toString('hex'),
    ...extra,
  };
}

/** The operator starts an install (admin token): Slack's authorize page, and the cookies Herald set (its binder, the state). */
export async function startInstall(h: Pick<TestHerald, 'url' | 'adminToken'>, identity: string): Promise<{ authorize: URL; cookie: string }> {
  const res = await fetch(`${h.url}/slack/install?identity=${identity}`, { headers: { authorization: `Bearer ${h.adminToken}` }, redirect: 'manual' });
  expect(res.status, await res.clone().text()).toBe(302);
  return { authorize: new URL(res.headers.get('location') ?? ''), cookie: res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ') };
}

/** The person picks workspace `team` on Slack's authorize page: Slack's redirect back to Herald (with its code and state). */
export async function pickWorkspace(authorize: URL, team: string): Promise<string> {
  const u = new URL(authorize);
  u.searchParams.set('team', team);
  const picked = await fetch(u, { redirect: 'manual' });
  expect(picked.status).toBe(302);
  return picked.headers.get('location') ?? '';
}

/** The browser follows Slack's redirect back, with `cookie`. */
export async function finishInstall(callback: string, cookie: string): Promise<{ status: number; text: string }> {
  const res = await fetch(callback, { headers: { cookie }, redirect: 'manual' });
  return { status: res.status, text: await res.text() };
}

/** The whole dance: identity installed in workspace `team` (or refused: the status and page say why). */
export async function installDance(h: Pick<TestHerald, 'url' | 'adminToken'>, identity: string, team: string): Promise<{ status: number; text: string; callback: string; cookie: string }> {
  const { authorize, cookie } = await startInstall(h, identity);
  const callback = await pickWorkspace(authorize, team);
  return { ...(await finishInstall(callback, cookie)), callback, cookie };
}
