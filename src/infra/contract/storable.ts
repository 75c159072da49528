/**
 * What PostgreSQL's `text` and `jsonb` cannot hold: U+0000, and a lone surrogate (a high one not
 * followed by a low one, or a low one not after a high one). `json` takes both as `\u0000` and
 * `\ud800` escapes and then fails on the row whenever a statement reads into it (`target->>'x'`,
 * `body::jsonb`), so such text must not get in at all. This is the one check, applied where input
 * enters: every HTTP operation's query and body (src/infra/http/api.ts), every MCP tool's
 * arguments (src/mcp/server.ts); platform events, which cannot be refused, are made storable with
 * `storableText`/`storableValue` where the platforms build them (src/platforms/).
 */

/** A high surrogate not followed by a low one, or a low one not after a high one (UTF-16 code units: no `u` flag). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** Why a string cannot be stored, as an error message's tail; undefined: it can. */
export function unstorable(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain NUL (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must not contain a lone surrogate (U+D800..U+DFFF without its pair)';
  return undefined;
}

/** The longest field name an error message repeats. */
const FIELD_NAME_MAX = 100;

/**
 * The first query parameter or body field (a value, or a key) that cannot be stored, as
 * `<field> must not contain ...` naming it as the caller wrote it (`text`, `card.title`, `ids[]`,
 * `a key of card`); undefined: all of it can. Walked with a stack of its own, in document order: a
 * body may nest arrays thousands deep.
 */
export function unstorableField(query: Readonly<Record<string, string | readonly string[]>>, body: unknown, root?: string): string | undefined {
  for (const [name, value] of Object.entries(query)) {
    const why = unstorable(name) ?? (typeof value === 'string' ? [value] : value).map(unstorable).find((w) => w !== undefined);
    if (why !== undefined) return `${shortName(name)} ${why}`;
  }
  const pending: [unknown, string | undefined][] = [[body, root]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, field] = next;
    if (typeof value === 'string') {
      const why = unstorable(value);
      if (why !== undefined) return `${shortName(field ?? 'request body')} ${why}`;
    } else if (Array.isArray(value)) {
      const items = within(`${field ?? 'request body'}[]`);
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], items]);
    } else if (typeof value === 'object' && value !== null) {
      const entries = Object.entries(value);
      for (const [key] of entries) {
        const why = unstorable(key);
        if (why !== undefined) return `${shortName(field === undefined ? 'a key of the request body' : `a key of ${field}`)} ${why}`;
      }
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i] as [string, unknown];
        pending.push([item, within(field === undefined ? key : `${field}.${key}`)]);
      }
    }
  }
  return undefined;
}

/** A field's name while walking, kept just past FIELD_NAME_MAX (deep nesting must not build ever longer names). */
function within(name: string): string {
  return name.length > FIELD_NAME_MAX + 1 ? name.slice(0, FIELD_NAME_MAX + 1) : name;
}

/** A field name as the caller wrote it, cut to a length fit for an error message. */
function shortName(name: string): string {
  return name.length > FIELD_NAME_MAX ? `${name.slice(0, FIELD_NAME_MAX)}…` : name;
}

/**
 * Text from a platform (a message, a name, a channel) made storable: NUL dropped, each lone
 * surrogate replaced by U+FFFD (what a UTF-8 encoder writes for it). A platform event cannot be
 * answered with a 400, and one bad character must not cost the event.
 */
export function storableText(text: string): string {
  const noNul = text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
  return LONE_SURROGATE.test(noNul) ? noNul.replace(LONE_SURROGATES, '\ufffd') : noNul;
}

/** A platform's value (an event, its raw payload) with every string in it, keys too, made storable. */
export function storableValue<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => storableValue(v)) as T;
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableText(k), storableValue(v)])) as T;
  }
  return value;
}
