import type { OutgoingMessage } from '../platform.js';

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * Control characters kept in text for IRC: its formatting codes (bold 02, colour 03, hex colour 04,
 * reset 0F, monospace 11, reverse 16, italics 1D, strikethrough 1E, underline 1F) and whitespace
 * (tab; CR and LF end a line).
 */
const KEPT_CONTROLS: ReadonlySet<number> = new Set([0x02, 0x03, 0x04, 0x0f, 0x11, 0x16, 0x1d, 0x1e, 0x1f, 0x09, 0x0a, 0x0d]);

/**
 * Whether a UTF-16 code unit is a control character an agent's text may not carry to IRC: every C0
 * and C1 control and DEL but KEPT_CONTROLS. Among them 01, which frames a CTCP request (DCC SEND,
 * ACTION, VERSION) that clients act on, NUL, and ESC, which drives the terminals many IRC clients
 * run in.
 */
function isIrcControl(unit: number): boolean {
  return (unit < 0x20 || (unit >= 0x7f && unit <= 0x9f)) && !KEPT_CONTROLS.has(unit);
}

/** Why `text` cannot be sent to IRC as it is (a control character other than formatting), or undefined. */
export function ircTextProblem(text: string): string | undefined {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (!isIrcControl(unit)) continue;
    const code = unit.toString(16).toUpperCase().padStart(4, '0');
    return `text must not contain control characters other than IRC formatting (bold, colour, italics, underline, strikethrough, monospace, reverse, reset): U+${code} at character ${i + 1}`;
  }
  return undefined;
}

/** `text` without the control characters IRC text may not carry (see isIrcControl); formatting stays. */
export function withoutIrcControls(text: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    if (!isIrcControl(text.charCodeAt(i))) continue;
    out += text.slice(from, i);
    from = i + 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Split text into lines of at most `maxBytes` UTF-8 bytes each, never inside a grapheme (an emoji
 * with its modifiers, a letter with its accents) and, where a chunk has one, after its last space.
 * Nothing else is dropped: concatenating the parts of one line gives it back exactly. Line breaks
 * end a part (IRC lines cannot hold them); empty lines are skipped (a server refuses an empty
 * PRIVMSG). Control characters other than formatting are dropped here, the one place text becomes
 * IRC lines, whatever route it came by (a chat send refuses them earlier, where it can say so).
 */
export function splitForIrc(text: string, maxBytes: number): string[] {
  if (maxBytes < 4) throw new Error('maxBytes must leave room for one UTF-8 character');
  const parts: string[] = [];
  for (const line of withoutIrcControls(text.replace(/\r\n?/g, '\n')).split('\n')) {
    let current = '';
    let currentBytes = 0;
    // Where the current chunk could end after a space: [chars, bytes].
    let lastSpace: [number, number] | undefined;
    for (const { segment } of segmenter.segment(line)) {
      for (const piece of bytes(segment) > maxBytes ? [...segment] : [segment]) {
        const b = bytes(piece);
        if (currentBytes + b > maxBytes) {
          if (lastSpace !== undefined && lastSpace[0] < current.length) {
            parts.push(current.slice(0, lastSpace[0]));
            current = current.slice(lastSpace[0]);
            currentBytes -= lastSpace[1];
          } else {
            parts.push(current);
            current = '';
            currentBytes = 0;
          }
          lastSpace = undefined;
        }
        current += piece;
        currentBytes += b;
        if (/^\s+$/u.test(piece)) lastSpace = [current.length, currentBytes];
      }
    }
    if (current !== '') parts.push(current);
  }
  return parts;
}

/** Room kept in a line for the prefix the server adds when relaying it (`:nick!user@host `). */
const HOST_RESERVE = 64;

/**
 * Bytes of text one PRIVMSG to `channel` from `nick` can carry without the server cutting it: the
 * line length less the command, the CRLF, and the prefix the server adds when relaying it.
 */
export function ircLineBudget(lineLength: number, nick: string, channel: string): number {
  return lineLength - Buffer.byteLength(`:${nick}!${nick.slice(0, 10)}@ PRIVMSG ${channel} :\r\n`) - HOST_RESERVE;
}

/** IRC's channel name for what a tool was given: `ops` → `#ops`, lower case. */
export function ircChannel(name: string): string {
  const n = name.trim();
  return (/^[#&]/.test(n) ? n : `#${n}`).toLowerCase();
}

/** `key` (one line) or `key:i/n` (part i of n). */
export function parseTag(tag: string): { key: string; index: number; count: number } | undefined {
  const m = /^(.*):(\d+)\/(\d+)$/.exec(tag);
  if (m === null) return { key: tag, index: 0, count: 1 };
  const index = Number(m[2]);
  const count = Number(m[3]);
  return m[1] === undefined || index >= count ? undefined : { key: m[1], index, count };
}

/**
 * A protocol message as IRC text: content, then the card and links as plain lines, without the
 * control characters IRC text may not carry (the protocol accepts them; on IRC \x01 would be a CTCP
 * request). As sent, so the history fingerprint matches the lines the observer reads back.
 */
export function renderForIrc(message: OutgoingMessage): string {
  const lines: string[] = [];
  if (message.content !== undefined) lines.push(message.content);
  const card = message.card;
  if (card !== undefined) {
    if (card.title !== undefined) lines.push(card.url !== undefined ? `${card.title} <${card.url}>` : card.title);
    if (card.description !== undefined) lines.push(card.description);
    for (const f of card.fields ?? []) lines.push(`${f.name}: ${f.value}`);
    if (card.footer !== undefined) lines.push(card.footer);
  }
  for (const l of message.links ?? []) lines.push(`${l.label} <${l.url}>`);
  return withoutIrcControls(lines.join('\n'));
}
