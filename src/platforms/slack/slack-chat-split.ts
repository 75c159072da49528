const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * How long one part of a chat send is, in characters before escaping. Slack takes up to 40,000
 * characters of text per message, but it shortens a long message in the channel behind "Show
 * more", so a long text reads better as several messages of about 4,000 characters (Slack's own
 * advice for readable messages), split at line breaks. Escaping (`&` → `&amp;`) at most quintuples
 * a part: 20,000 characters, always inside the 40,000 limit.
 */
export const SLACK_PART_CHARS = 4_000;

/**
 * Split text into parts of at most `max` characters: at the last line break of a chunk, else at
 * its last whitespace (in its second half), else at the last whole grapheme (never inside an emoji
 * or a letter with its accents). The break a part ends at, and line breaks at either end of a
 * part, are dropped (the message boundary shows them); blank parts are dropped (Slack refuses an empty message). The same text always gives the
 * same parts, so a part's index names it on every attempt.
 */
export function splitForSlack(text: string, max = SLACK_PART_CHARS): string[] {
  const parts: string[] = [];
  let rest = text.replace(/\r\n?/g, '\n');
  while (rest.length > max) {
    const window = rest.slice(0, max + 1);
    const newline = window.lastIndexOf('\n');
    let cut: number;
    let skip = 1;
    if (newline > 0) cut = newline;
    else {
      const space = lastWhitespace(window);
      if (space > max / 2) cut = space;
      else {
        cut = lastGraphemeBoundary(rest, max);
        skip = 0;
      }
    }
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut + skip);
  }
  parts.push(rest);
  // Line breaks at either end of a part show as nothing in Slack.
  return parts.map((p) => p.replace(/^\n+|\n+$/g, '')).filter((p) => p.trim() !== '');
}

function lastWhitespace(s: string): number {
  for (let i = s.length - 1; i >= 0; i--) if (/\s/.test(s.charAt(i))) return i;
  return -1;
}

/** The last grapheme boundary at or before `max` (at least one grapheme, so a part is never empty). */
function lastGraphemeBoundary(s: string, max: number): number {
  let boundary = 0;
  for (const { index, segment } of segmenter.segment(s.slice(0, max + 64))) {
    const end = index + segment.length;
    if (end > max) return boundary > 0 ? boundary : end;
    boundary = end;
  }
  return boundary;
}

/** Text as Slack shows it literally: `&`, `<` and `>` escaped, so `<!channel>` or `<@U…>` notify no one. */
export function escapeSlack(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Slack's markup of a message as plain text: mentions and links keep their label, escapes undone. */
export function plainSlack(text: string): string {
  return text
    .replace(/<([^<>|]*)\|([^<>]*)>/g, (_m, _target: string, label: string) => label)
    .replace(/<!(here|channel|everyone)>/g, '@$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}
