import { loadConfig } from '../../src/config.js';

/**
 * The problems loadConfig names for an environment (beside a DISCORD_TOKEN, so Herald is not in
 * sandbox mode), each line that mentions `about` (e.g. `SLACK_`); none when it loads.
 */
export function configProblems(env: Record<string, string>, about: string): string[] {
  try {
    loadConfig({ DISCORD_TOKEN: 'x', ...env });
    return [];
  } catch (err) {
    return String(err).split('\n').filter((l) => l.includes(about)).map((l) => l.replace(/^\s*- /, ''));
  }
}
