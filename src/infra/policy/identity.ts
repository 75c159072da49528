/**
 * Identities: the accounts Herald speaks as on a platform. The one each platform is configured
 * with by its own variables is `default`; more are named by the operator, and the operator's
 * policy binds each agent to the one it speaks as (`identity:`).
 */
export const DEFAULT_IDENTITY = 'default';

/** An identity's name: a lowercase letter, then up to 31 lowercase letters, digits or `-`. */
export const IDENTITY_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/** Where an identity's secret comes from: `env:VARIABLE` or `file:/absolute/path`. */
export type SecretSource = { readonly env: string } | { readonly file: string };

/**
 * One `name[=env:VARIABLE|file:/path]` entry of an identities list: its name and where its secret
 * is (undefined: none given), or what is wrong with it.
 */
export function parseIdentityEntry(entry: string): { name: string; source: SecretSource | undefined } | { problem: string } {
  const eq = entry.indexOf('=');
  const name = eq < 0 ? entry : entry.slice(0, eq);
  if (!IDENTITY_NAME.test(name)) return { problem: `${JSON.stringify(name.slice(0, 40))} is not an identity name (a lowercase letter, then up to 31 lowercase letters, digits or -)` };
  if (name === DEFAULT_IDENTITY) return { problem: `"${DEFAULT_IDENTITY}" is the identity the platform's own variables configure; name the others differently` };
  if (eq < 0) return { name, source: undefined };
  const ref = entry.slice(eq + 1);
  if (ref.startsWith('env:') && /^[A-Za-z_][A-Za-z0-9_]*$/.test(ref.slice(4))) return { name, source: { env: ref.slice(4) } };
  if (ref.startsWith('file:/') && !ref.includes('\0')) return { name, source: { file: ref.slice(5) } };
  return { problem: `identity ${name}: its secret must be given as env:VARIABLE or file:/absolute/path` };
}
