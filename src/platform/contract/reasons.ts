import { Ajv, type ValidateFunction } from 'ajv';
import { InvalidRequestError } from '../errors.js';
import { withUtf16Lengths } from './ajv.js';
import type { SchemaNode } from './spec.js';

/**
 * Finds the protocol's reason for a value that fails a contract schema: the `x-herald-reason` of
 * the first failing schema, walking properties in the order the contract declares them (the
 * protocol's "first failure wins"). `x-herald-reasons` refines a reason by failing keyword.
 */
export class SchemaReasons {
  private readonly ajv = withUtf16Lengths(new Ajv({ strict: false, allErrors: false, validateSchema: false }));
  private readonly compiled = new WeakMap<SchemaNode, ValidateFunction>();

  /** Throws InvalidRequestError with the first failure's reason; returns quietly when valid. */
  check(schema: SchemaNode, value: unknown): void {
    const reason = this.firstFailure(schema, value, undefined);
    if (reason !== undefined) throw new InvalidRequestError(reason);
  }

  firstFailure(schema: SchemaNode, value: unknown, inherited: string | undefined): string | undefined {
    const validate = this.validator(schema);
    if (validate(value)) return undefined;
    const reason = schema['x-herald-reason'] ?? inherited;
    // A value of the wrong type fails the schema itself, whatever keyword Ajv reported last
    // (an edit body that is a string fails `anyOf` too, but it is not an object first).
    if (!hasType(schema.type, value)) return reason ?? 'request is invalid';
    const byKeyword = schema['x-herald-reasons'] ?? {};
    if (isPlainObject(value) && schema.properties !== undefined) {
      for (const [key, child] of Object.entries(schema.properties)) {
        if (value[key] === undefined) {
          if (schema.required?.includes(key)) return child['x-herald-reason'] ?? reason;
          continue;
        }
        const found = this.firstFailure(child, value[key], reason);
        if (found !== undefined) return found;
      }
    }
    const list: unknown = value;
    if (Array.isArray(list) && schema.items !== undefined) {
      if (schema.maxItems !== undefined && list.length > schema.maxItems) return byKeyword['maxItems'] ?? reason;
      for (const item of list as unknown[]) {
        const found = this.firstFailure(schema.items, item, reason);
        if (found !== undefined) return found;
      }
    }
    const keyword = validate.errors?.at(-1)?.keyword;
    return (keyword !== undefined ? byKeyword[keyword] : undefined) ?? reason ?? 'request is invalid';
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
