import fc from 'fast-check';
import { Ajv, type ValidateFunction } from 'ajv';
import { withUtf16Lengths } from '../../src/infra/contract/ajv.js';

/**
 * Boundary values of one field, derived from its contract schema (dereferenced): the largest and
 * smallest numbers a pattern or a minimum/maximum allows and the ones just past them, the longest
 * string maxLength allows and one past it, the empty string, NUL and lone surrogates, every enum
 * member's neighbours, arrays at maxItems and one past. Enumerated, never random: the same
 * contract gives the same list, in the same order.
 */

export type Schema = Record<string, unknown>;

/** A value to put in a field: JSON, or a number's literal as written (`2^63` is no JavaScript number). */
export type Value = { json: unknown } | { literal: string };

export interface Boundary {
  /** What it is, for the report: `max pattern (19 digits)`, `enum "post" upper`, `NUL`. */
  label: string;
  value: Value;
}

const ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateFormats: false }));
const compiled = new WeakMap<Schema, ValidateFunction>();

/** Whether a value is valid by a field's schema (a literal is read as the JSON number it writes). */
export function validBy(schema: Schema, value: Value): boolean {
  let check = compiled.get(schema);
  if (check === undefined) {
    check = ajv.compile(schema);
    compiled.set(schema, check);
  }
  return check('json' in value ? value.json : JSON.parse(value.literal));
}

/** The value as text: a query parameter's, a path segment's, a header's. */
export function asText(value: Value): string {
  if ('literal' in value) return value.literal;
  return typeof value.json === 'string' ? value.json : JSON.stringify(value.json);
}

const TYPES = (schema: Schema): string[] => (Array.isArray(schema['type']) ? (schema['type'] as string[]) : typeof schema['type'] === 'string' ? [schema['type']] : []);

/** A value valid by the schema, chosen without randomness: its example, default, const, first enum member, or one built from its bounds. */
export function sampleOf(schema: Schema): unknown {
  if (schema['example'] !== undefined) return structuredClone(schema['example']);
  if (Array.isArray(schema['examples']) && schema['examples'].length > 0) return structuredClone(schema['examples'][0]);
  if ('const' in schema) return schema['const'];
  if (schema['default'] !== undefined) return structuredClone(schema['default']);
  if (Array.isArray(schema['enum'])) return (schema['enum'] as unknown[])[0];
  for (const key of ['oneOf', 'anyOf'] as const) if (Array.isArray(schema[key])) return sampleOf((schema[key] as Schema[])[0] ?? {});
  if (Array.isArray(schema['allOf'])) return Object.assign({}, ...(schema['allOf'] as Schema[]).map((s) => sampleOf(s) as object));
  const type = TYPES(schema)[0];
  switch (type) {
    case 'string': {
      const min = Number(schema['minLength'] ?? 0);
      const max = Number(schema['maxLength'] ?? Infinity);
      if (typeof schema['pattern'] === 'string') {
        const arb = fc.stringMatching(new RegExp(schema['pattern'])).filter((s) => s.length >= min && s.length <= max);
        return fc.sample(arb, { seed: 1, numRuns: 1 })[0];
      }
      return 'x'.repeat(Math.max(1, min));
    }
    case 'integer':
    case 'number':
      return typeof schema['minimum'] === 'number' ? schema['minimum'] : typeof schema['maximum'] === 'number' ? Math.min(1, schema['maximum']) : 1;
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: Number(schema['minItems'] ?? 0) }, () => sampleOf((schema['items'] ?? {}) as Schema));
    case 'object': {
      const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
      const required = (schema['required'] ?? []) as string[];
      return Object.fromEntries(required.filter((k) => properties[k] !== undefined).map((k) => [k, sampleOf(properties[k] as Schema)]));
    }
    default:
      return 'x';
  }
}

const pow = (n: number): bigint => 10n ** BigInt(n);

/** Numbers worth trying as decimal text: every length's smallest and largest, and the machine limits. */
const NUMBER_CANDIDATES: readonly bigint[] = (() => {
  const set = new Set<bigint>([0n, 1n, 2n ** 31n - 1n, 2n ** 31n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n]);
  for (let n = 1; n <= 30; n++) {
    set.add(pow(n) - 1n);
    set.add(pow(n - 1));
  }
  return [...set].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
})();

/** A string pattern's numbers: its largest accepted and the next past it, its smallest; when it takes digits only. */
function patternNumbers(re: RegExp): Boundary[] {
  const takes = (s: string): boolean => re.test(s);
  if (!NUMBER_CANDIDATES.some((n) => takes(String(n))) || takes('a') || takes('1a')) return [];
  const out: Boundary[] = [];
  const accepted = NUMBER_CANDIDATES.filter((n) => takes(String(n)));
  const largest = accepted[accepted.length - 1] as bigint;
  const smallest = accepted[0] as bigint;
  const add = (label: string, n: bigint): void => void out.push({ label: `${label} (${String(n).length} digits)`, value: { json: String(n) } });
  add('largest number the pattern takes', largest);
  add('one past it', largest + 1n);
  const next = NUMBER_CANDIDATES.find((n) => n > largest + 1n);
  if (next !== undefined) add('next number past it', next);
  add('smallest number the pattern takes', smallest);
  if (smallest > 0n) add('one below it', smallest - 1n);
  // Each limit Herald's stores have, as text: 2^63 - 1 is int8's largest, 2^63 its first overflow.
  for (const [label, n] of [['2^31', 2n ** 31n], ['2^53 + 1', 2n ** 53n + 1n], ['2^63 - 1', 2n ** 63n - 1n], ['2^63', 2n ** 63n], ['2^64', 2n ** 64n]] as const) {
    if (n !== largest && n !== largest + 1n && n !== next) add(label, n);
  }
  out.push({ label: 'a negative number', value: { json: '-1' } }, { label: 'leading zeros', value: { json: `00${String(smallest)}` } });
  return out;
}

/** Boundaries of a string schema, around a valid sample. */
function stringBoundaries(schema: Schema, sample: string): Boundary[] {
  const out: Boundary[] = [];
  const s = (label: string, v: string): void => void out.push({ label, value: { json: v } });
  const min = typeof schema['minLength'] === 'number' ? schema['minLength'] : undefined;
  const max = typeof schema['maxLength'] === 'number' ? schema['maxLength'] : undefined;
  const pattern = typeof schema['pattern'] === 'string' ? new RegExp(schema['pattern'], 'u') : undefined;
  s('empty', '');
  if (pattern !== undefined) {
    out.push(...patternNumbers(pattern));
    // The pattern's lengths: the sample one character longer and shorter, and as long as it takes.
    const last = sample.at(-1) ?? 'x';
    let longest = sample;
    while (longest.length < 4096 && pattern.test(longest + last)) longest += last;
    if (longest !== sample) s(`longest the pattern takes (${longest.length})`, longest);
    s(`one longer than the pattern takes (${longest.length + 1})`, longest + last);
    if (sample.length > 1) s('one shorter', sample.slice(0, -1));
    if (sample.toUpperCase() !== sample) s('upper case', sample.toUpperCase());
    if (sample.toLowerCase() !== sample) s('lower case', sample.toLowerCase());
  }
  if (max !== undefined && max <= 1_000_000) {
    const fill = pattern === undefined ? 'x' : (sample.at(-1) ?? 'x');
    s(`maxLength (${max})`, pattern === undefined ? fill.repeat(max) : sample + fill.repeat(Math.max(0, max - sample.length)));
    s(`maxLength + 1 (${max + 1})`, pattern === undefined ? fill.repeat(max + 1) : sample + fill.repeat(Math.max(0, max + 1 - sample.length)));
    // UTF-16 code units: an emoji is two of them.
    if (pattern === undefined && max >= 2) {
      s(`maxLength in emoji (${max})`, '😀'.repeat(Math.floor(max / 2)) + (max % 2 === 1 ? 'x' : ''));
      s(`maxLength + 1 in emoji`, '😀'.repeat(Math.floor(max / 2) + 1));
    }
  }
  if (min !== undefined && min > 1) s(`minLength - 1 (${min - 1})`, sample.slice(0, min - 1) || 'x'.repeat(min - 1));
  s('NUL alone', '\u0000');
  s('NUL after the value', `${sample}\u0000`);
  s('a lone high surrogate', `${sample}\ud800`);
  s('a lone low surrogate', '\udc00');
  s('a trailing space', `${sample} `);
  s('a leading space', ` ${sample}`);
  s('a line break', `${sample}\n`);
  return out;
}

/** An enum member's neighbours: other case, a letter off, a trailing space. */
function enumBoundaries(members: readonly unknown[]): Boundary[] {
  const out: Boundary[] = [{ label: 'empty', value: { json: '' } }];
  for (const m of members) {
    if (typeof m !== 'string' || m === '') continue;
    const off = m.slice(0, -1) + String.fromCharCode(m.charCodeAt(m.length - 1) + 1);
    const capital = (m[0] ?? '').toUpperCase() + m.slice(1);
    for (const [label, v] of [['upper case', m.toUpperCase()], ['capitalised', capital], ['a letter off', off], ['a trailing space', `${m} `], ['NUL after it', `${m}\u0000`]] as const) {
      if (v !== m && !out.some((b) => 'json' in b.value && b.value.json === v)) out.push({ label: `enum ${JSON.stringify(m)} ${label}`, value: { json: v } });
    }
  }
  return out;
}

/** Integer and number boundaries: its minimum and maximum and one past each, the machine limits, a fraction. */
function numberBoundaries(schema: Schema, integer: boolean): Boundary[] {
  const out: Boundary[] = [];
  const lit = (label: string, n: bigint | string): void => void out.push({ label, value: { literal: String(n) } });
  const min = typeof schema['minimum'] === 'number' ? schema['minimum'] : undefined;
  const max = typeof schema['maximum'] === 'number' ? schema['maximum'] : undefined;
  if (min !== undefined) {
    lit(`minimum (${min})`, String(min));
    lit('minimum - 1', String(min - 1));
  }
  if (max !== undefined) {
    lit(`maximum (${max})`, String(max));
    lit('maximum + 1', String(max + 1));
  }
  lit('0', '0');
  lit('-1', '-1');
  lit('2^31 - 1', 2n ** 31n - 1n);
  lit('2^31', 2n ** 31n);
  lit('2^53 + 1', 2n ** 53n + 1n);
  lit('2^63 - 1', 2n ** 63n - 1n);
  lit('2^63', 2n ** 63n);
  lit('2^64', 2n ** 64n);
  lit('-2^63 - 1', -(2n ** 63n) - 1n);
  lit('1e308', '1e308');
  if (integer) {
    lit('a fraction', '1.5');
    lit('an integer written as 1.0', '1.0');
  }
  out.push({ label: 'the number as a string', value: { json: String(max ?? min ?? 1) } });
  return out;
}

/**
 * Every boundary of one field. `sample`: the field's value in a valid request (the pattern's
 * lengths are found around it). An array's own bounds only; its items are another field.
 */
export function boundaries(schema: Schema, sample: unknown): Boundary[] {
  if ('const' in schema) return typeof schema['const'] === 'string' ? enumBoundaries([schema['const']]) : [];
  if (Array.isArray(schema['enum'])) return enumBoundaries(schema['enum'] as unknown[]);
  const types = TYPES(schema);
  if (types.includes('string')) return stringBoundaries(schema, typeof sample === 'string' ? sample : String(sampleOf(schema)));
  if (types.includes('integer') || types.includes('number')) return numberBoundaries(schema, types.includes('integer'));
  if (types.includes('array')) {
    const item = Array.isArray(sample) && sample.length > 0 ? sample[0] : sampleOf((schema['items'] ?? {}) as Schema);
    const out: Boundary[] = [{ label: 'empty array', value: { json: [] } }];
    const max = typeof schema['maxItems'] === 'number' ? schema['maxItems'] : undefined;
    if (max !== undefined && max <= 10_000) {
      out.push({ label: `maxItems (${max})`, value: { json: Array.from({ length: max }, () => structuredClone(item)) } });
      out.push({ label: `maxItems + 1 (${max + 1})`, value: { json: Array.from({ length: max + 1 }, () => structuredClone(item)) } });
    }
    const min = typeof schema['minItems'] === 'number' ? schema['minItems'] : undefined;
    if (min !== undefined && min > 1) out.push({ label: `minItems - 1 (${min - 1})`, value: { json: Array.from({ length: min - 1 }, () => structuredClone(item)) } });
    return out;
  }
  if (types.includes('boolean')) return [{ label: 'the string "true"', value: { json: 'true' } }, { label: '1', value: { literal: '1' } }];
  return [];
}

const coercing = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateFormats: false, coerceTypes: true }));
const coercedChecks = new WeakMap<Schema, ValidateFunction>();

/** Whether text is valid by a parameter's schema, read as the contract reads parameters (`limit=5` is the integer 5). */
export function validAsText(schema: Schema, text: string): boolean {
  let check = coercedChecks.get(schema);
  if (check === undefined) {
    check = coercing.compile({ type: 'object', properties: { v: schema } });
    coercedChecks.set(schema, check);
  }
  return check({ v: text });
}
