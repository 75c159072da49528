import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// Secrets Herald keeps in its store (a Slack workspace's bot token from an OAuth install) are
// sealed with AES-256-GCM under HERALD_CREDENTIALS_KEY: a row read from the database, a backup or
// a replica's disk shows no token, and a row altered or moved to another identity does not open.

/** The sealed form's version prefix: a later scheme can be told apart. */
const V1 = 'v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** HERALD_CREDENTIALS_KEY read: 32 bytes as 64 hex digits or as base64/base64url; or why not. */
export function parseCredentialsKey(text: string): Buffer | { problem: string } {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}={0,1}$/.test(trimmed)) {
    const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  return { problem: 'HERALD_CREDENTIALS_KEY must be 32 random bytes, as 64 hex digits or base64 (e.g. the output of: node -e "console.log(require(\'crypto\').randomBytes(32).toString(\'base64\'))")' };
}

/** A new key, base64: what sandbox mode keeps in its data folder. */
export function newCredentialsKey(): string {
  return randomBytes(32).toString('base64');
}

/** A sealed secret that does not open: another key, or a row altered or moved. */
export class SealedSecretError extends Error {
  constructor() {
    super('the stored secret does not open with HERALD_CREDENTIALS_KEY (another key, or the row was altered)');
    this.name = 'SealedSecretError';
  }
}

/** `secret` sealed under `key`, bound to `context` (the row it belongs to): `v1:` + base64(iv, tag, ciphertext). */
export function seal(key: Buffer, secret: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return V1 + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** The secret `seal` sealed, or SealedSecretError. */
export function unseal(key: Buffer, sealed: string, context: string): string {
  if (!sealed.startsWith(V1)) throw new SealedSecretError();
  const raw = Buffer.from(sealed.slice(V1.length), 'base64');
  if (raw.length < IV_BYTES + TAG_BYTES) throw new SealedSecretError();
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SealedSecretError();
  }
}
