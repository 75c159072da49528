import { readFileSync } from 'node:fs';
import type { EnvReader } from '../infra/env.js';
import { parseIdentityEntry } from '../infra/policy/identity.js';

/** One more account a platform speaks as (an identity): its name, and its token once read. */
export interface TokenIdentity {
  /** The name the operator's policy binds agents to (`identity:` in HERALD_POLICY). */
  readonly name: string;
  /** Its token, read from where the list says; undefined in sandbox mode, where the sandbox makes the account. */
  readonly token: string | undefined;
  /** `name=install`: its token comes later, from installing the app there from Herald (the platform's own install flow). */
  readonly install?: true;
}

/** What a platform's identities list is checked against. */
export interface TokenListRules {
  /** The list's variable, e.g. HERALD_DISCORD_IDENTITIES. */
  readonly variable: string;
  /** The variable of the default identity's token, and its value (unset: sandbox mode, where entries are bare names). */
  readonly main: { readonly variable: string; readonly value: string | undefined };
  /** What the token is, for messages: `bot token`. */
  readonly what: string;
  /** What the sandbox makes for a bare name, for messages: `bots`, `workspaces`. */
  readonly sandboxMakes: string;
  /** A problem with a token's shape (e.g. not xoxb-…), or undefined. */
  readonly shape?: (token: string) => string | undefined;
  /** Said after "each identity is … of its own" when two share a token, e.g. how start-up checks it. */
  readonly ownNote?: string;
  /** Whether `name=install` is allowed: the token comes from installing the app from Herald (Slack's OAuth install). */
  readonly installs?: boolean;
}

/**
 * A platform's identities list (`name=env:VARIABLE`, `name=file:/path`, or in sandbox mode a bare
 * `name`), each token read from where it says; problems go to `env`. With a real platform (its
 * main token set) every one needs its token; in sandbox mode none may name one. A token is never
 * logged nor stored: only where it is read from is said.
 */
export function tokenIdentities(env: EnvReader, rules: TokenListRules): TokenIdentity[] {
  const { variable, main, what } = rules;
  const real = main.value !== undefined;
  const out: TokenIdentity[] = [];
  for (const entry of env.list(variable)) {
    if (rules.installs === true && entry.endsWith('=install')) {
      const parsed = parseIdentityEntry(entry.slice(0, -'=install'.length));
      if ('problem' in parsed) env.problem(`${variable}: ${parsed.problem}`);
      else if (out.some((i) => i.name === parsed.name)) env.problem(`${variable} names ${parsed.name} twice`);
      else out.push({ name: parsed.name, token: undefined, install: true });
      continue;
    }
    const parsed = parseIdentityEntry(entry);
    if ('problem' in parsed) {
      env.problem(`${variable}: ${parsed.problem}`);
      continue;
    }
    const { name, source } = parsed;
    if (out.some((i) => i.name === name)) env.problem(`${variable} names ${name} twice`);
    if (source === undefined) {
      if (real) env.problem(`${variable}: identity ${name} needs its ${what} (${name}=env:VARIABLE or ${name}=file:/path)`);
      out.push({ name, token: undefined });
      continue;
    }
    if (!real) env.problem(`${variable}: identity ${name} names a token, but ${main.variable} is unset (sandbox mode makes its ${rules.sandboxMakes}: give bare names)`);
    let token: string | undefined;
    if ('env' in source) token = env.text(source.env)?.trim();
    else {
      try {
        token = readFileSync(source.file, 'utf8').trim();
      } catch (err) {
        env.problem(`${variable}: identity ${name}: cannot read ${source.file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
        continue;
      }
    }
    const mainToken = main.value?.trim();
    const shape = token === undefined || token === '' ? undefined : rules.shape?.(token);
    if (token === undefined || token === '') env.problem(`${variable}: identity ${name}: ${'env' in source ? `${source.env} is unset or empty` : `${source.file} is empty`}`);
    else if (shape !== undefined) env.problem(`${variable}: identity ${name}: ${shape}`);
    else if (token === mainToken || out.some((i) => i.token === token)) env.problem(`${variable}: identity ${name} has the token of ${token === mainToken ? main.variable : `identity ${out.find((i) => i.token === token)?.name ?? ''}`}: each identity is ${rules.ownNote ?? 'an account of its own'}`);
    else out.push({ name, token });
  }
  return out;
}
