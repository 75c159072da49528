import { describe, expect, it } from 'vitest';
import { renderForIrc } from '../src/platforms/irc/split.js';
import { ircTextProblem, splitForIrc, withoutIrcControls } from '../src/platforms/irc/split.js';

/** What of an agent's text may reach IRC: formatting and whitespace, never a control function. */
describe('control characters in text for IRC', () => {
  const formatting = ['\u0002', '\u0003', '\u0004', '\u000f', '\u0011', '\u0016', '\u001d', '\u001e', '\u001f'];
  const whitespace = ['\t', '\n', '\r'];
  const controls = Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i))
    .concat(Array.from({ length: 0x21 }, (_, i) => String.fromCharCode(0x7f + i)))
    .filter((c) => !formatting.includes(c) && !whitespace.includes(c));

  it('refuses every C0 and C1 control and DEL but IRC formatting and whitespace, naming it and where it is', () => {
    expect(controls).toHaveLength(0x20 + 0x21 - formatting.length - whitespace.length);
    expect(ircTextProblem('\u0001DCC SEND x 1 2 3\u0001')).toMatch(/^text must not contain control characters other than IRC formatting .*: U\+0001 at character 1$/);
    for (const c of controls) expect(ircTextProblem(`ok ${c}`), `U+${c.charCodeAt(0).toString(16)}`).toMatch(/at character 4$/);
    for (const c of [...formatting, ...whitespace]) expect(ircTextProblem(`ok ${c} ok`)).toBeUndefined();
    expect(ircTextProblem('Grüße 👩‍💻 — « » ‽ \u00a0')).toBeUndefined();
  });

  it('drops them where text becomes IRC lines (a protocol post\'s route), keeping formatting', () => {
    expect(withoutIrcControls('\u0001ACTION waves\u0001 \u0002hi\u0002\u0007\u001b[31m')).toBe('ACTION waves \u0002hi\u0002[31m');
    expect(splitForIrc('\u0001DCC SEND x\u0001\r\nnext \u0003' + '04red', 100)).toEqual(['DCC SEND x', 'next \u000304red']);
    expect(renderForIrc({ content: '\u0001PING 1\u0001', card: { title: 'T\u0000', description: 'd\u007f' }, links: [{ label: 'l\u0085', url: 'https://example.com' }] })).toBe('PING 1\nT\nd\nl <https://example.com>');
  });
});
