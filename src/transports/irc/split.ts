const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Split text into lines of at most `maxBytes` UTF-8 bytes each, never inside a grapheme (an emoji
 * with its modifiers, a letter with its accents) and, where a chunk has one, after its last space.
 * Nothing is dropped: concatenating the parts of one line gives it back exactly. Line breaks end a
 * part (IRC lines cannot hold them); empty lines are skipped (a server refuses an empty PRIVMSG).
 */
export function splitForIrc(text: string, maxBytes: number): string[] {
  if (maxBytes < 4) throw new Error('maxBytes must leave room for one UTF-8 character');
  const parts: string[] = [];
  for (const line of text.replace(/\r\n?/g, '\n').split('\n')) {
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
