import { Ajv, type ValidateFunction } from 'ajv';
import { InvalidRequestError } from '../errors.js';
import { withUtf16Lengths } from './ajv.js';
import type { SchemaNode } from './spec.js';

/**
 * Finds the reason for a value that fails a contract schema, walking properties in the order the
 * contract declares them (the protocol's "first failure wins"): the `x-herald-reason` of the first
 * failing schema, refined by failing keyword with `x-herald-reasons`. Where the contract gives no
 * reason, one is written from the schema itself, naming the field and what it must be
 * (`limit must be an integer from 1 to 200`).
 */
export class SchemaReasons {
  private readonly ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateSchema: false }));
  private readonly compiled = new WeakMap<SchemaNode, ValidateFunction>();

  /** Throws InvalidRequestError with the first failure's reason; returns quietly when valid. */
  check(schema: SchemaNode, value: unknown, field?: string): void {
    const reason = this.firstFailure(schema, value, field);
    if (reason !== undefined) throw new InvalidRequestError(reason);
  }

  /** The first failure's reason, undefined when `value` is valid. `field` names the value (none: the request body). */
  firstFailure(schema: SchemaNode, value: unknown, field?: string): string | undefined {
    return this.failure(schema, value, field)?.reason;
  }

  /**
   * The first failure: its reason and the field it is about (`text`, `card.title`, `ids[]`;
   * undefined for the value itself). `inherited` is the reason of the array `value` is an item of,
   * which speaks for its items too (`ids must be 1..100 inbox ids`). An object's reason does not
   * speak for its properties: a property without one is named by a reason written from its schema.
   */
  failure(schema: SchemaNode, value: unknown, field?: string, inherited?: string): { reason: string; field: string | undefined } | undefined {
    const validate = this.validator(schema);
    if (validate(value)) return undefined;
    const here = (reason: string): { reason: string; field: string | undefined } => ({ reason, field });
    const own = schema['x-herald-reason'] ?? inherited;
    const name = field ?? 'request body';
    // A value of the wrong type fails the schema itself, whatever keyword Ajv reported last
    // (an edit body that is a string fails `anyOf` too, but it is not an object first).
    if (!hasType(schema.type, value)) return here(own ?? `${name} must be ${describeSchema(schema)}`);
    const byKeyword = schema['x-herald-reasons'] ?? {};
    if (isPlainObject(value) && schema.properties !== undefined) {
      for (const [key, child] of Object.entries(schema.properties)) {
        const childField = field === undefined ? key : `${field}.${key}`;
        if (value[key] === undefined) {
          if (schema.required?.includes(key)) return { reason: child['x-herald-reason'] ?? `${childField} is required: ${describeSchema(child)}`, field: childField };
          continue;
        }
        const found = this.failure(child, value[key], childField);
        if (found !== undefined) return found;
      }
    }
    const list: unknown = value;
    if (Array.isArray(list) && schema.items !== undefined) {
      if (schema.maxItems !== undefined && list.length > schema.maxItems) return here(byKeyword['maxItems'] ?? own ?? `${name} must be ${describeSchema(schema)}`);
      for (const item of list as unknown[]) {
        const found = this.failure(schema.items, item, `${name}[]`, own);
        if (found !== undefined) return found;
      }
    }
    const error = validate.errors?.at(-1);
    const keyword = error?.keyword;
    const refined = keyword !== undefined ? byKeyword[keyword] : undefined;
    if (refined !== undefined) return here(refined);
    const unknown = keyword === 'additionalProperties' ? (error?.params as { additionalProperty?: unknown } | undefined)?.additionalProperty : undefined;
    if (typeof unknown === 'string') {
      const known = Object.keys(schema.properties ?? {});
      const where = field === undefined ? '' : ` in ${field}`;
      return here(`unknown field ${JSON.stringify(unknown.slice(0, 64))}${where}${known.length > 0 ? `: the fields are ${known.join(', ')}` : ''}`);
    }
    return here(own ?? `${name} must be ${describeSchema(schema)}`);
  }

  private validator(schema: SchemaNode): ValidateFunction {
    let v = this.compiled.get(schema);
    if (v === undefined) {
      v = this.ajv.compile(schema);
      this.compiled.set(schema, v);
    }
    return v;
  }
}

/**
 * What a value of `schema` must be, in words: `a string of 1..100 characters`, `one of asc,
 * desc`, `an integer from 1 to 200`, `a string matching ^[0-9]{17,20}$`.
 */
export function describeSchema(schema: SchemaNode): string {
  if ('const' in schema) return JSON.stringify(schema['const']);
  const choices = schema['enum'];
  if (Array.isArray(choices)) return `one of ${choices.map((c) => (typeof c === 'string' ? c : JSON.stringify(c))).join(', ')}`;
  const num = (k: string): number | undefined => (typeof schema[k] === 'number' ? (schema[k] as number) : undefined);
  const range = (min: number | undefined, max: number | undefined, unit: string): string =>
    min !== undefined && max !== undefined ? (min === max ? ` of ${min} ${unit}` : ` of ${min}..${max} ${unit}`) : max !== undefined ? ` of at most ${max} ${unit}` : min !== undefined ? ` of at least ${min} ${unit}` : '';
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : schema.type === undefined ? [] : [schema.type];
  const type = types.find((t) => t !== 'null');
  const orNull = types.includes('null') && type !== undefined ? ' or null' : '';
  switch (type) {
    case 'string': {
      const pattern = typeof schema['pattern'] === 'string' ? ` matching ${schema['pattern']}` : '';
      const format = schema['format'] === 'uuid' ? 'a UUID' : typeof schema['format'] === 'string' ? `a string in ${schema['format']} format` : 'a string';
      return `${format}${range(num('minLength'), num('maxLength'), 'characters')}${pattern}${orNull}`;
    }
    case 'integer':
    case 'number': {
      const min = num('minimum');
      const max = num('maximum');
      const what = type === 'integer' ? 'an integer' : 'a number';
      const bounds = min !== undefined && max !== undefined ? ` from ${min} to ${max}` : min !== undefined ? ` of at least ${min}` : max !== undefined ? ` of at most ${max}` : '';
      return `${what}${bounds}${orNull}`;
    }
    case 'boolean':
      return `true or false${orNull}`;
    case 'array':
      return `an array${range(num('minItems'), num('maxItems'), 'items')}${schema.items !== undefined ? ` of ${plural(describeSchema(schema.items))}` : ''}${orNull}`;
    case 'object':
      return `an object${orNull}`;
    default:
      return 'valid';
  }
}

/** `a string …` → `strings …`, for an array's items. */
function plural(description: string): string {
  const m = /^(?:an?|one) (\w+)(.*)$/.exec(description);
  if (m === null || description.startsWith('one of')) return `values that are ${description}`;
  return `${m[1]}s${m[2]}`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether `value` is of the JSON Schema `type` (no type: any value). */
function hasType(type: unknown, value: unknown): boolean {
  switch (type) {
    case 'object':
      return isPlainObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return true;
  }
}
