import { createHash, randomBytes, randomInt } from 'node:crypto';

/** 30 symbols without look-alikes (no 0/O, 1/I/L, U). */
export const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTVWXYZ23456789';
/** 27 symbols of 30: log2(30^27) ≈ 132 bits, over the protocol's 128. */
export const CODE_LENGTH = 27;
export const CODE_TTL_MS = 10 * 60 * 1000;
export const MAX_LIVE_CODES = 5;

/** A pairing code, each symbol uniform (crypto.randomInt rejects biased draws) from a CSPRNG. */
export function newPairingCode(): string {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

/** Codes carry 132 bits of entropy, so a plain SHA-256 is as strong as a slow hash here. */
export function hashPairingCode(code: string): string {
  return createHash('sha256').update(code, 'utf8').digest('hex');
}

export function newGeneration(): string {
  return randomBytes(16).toString('base64url');
}

/** Cut to at most `max` UTF-16 units without leaving half a surrogate pair. */
export function truncateDisplayName(name: string, max = 100): string {
  if (name.length <= max) return name;
  const cut = name.slice(0, max);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}
