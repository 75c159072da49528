import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const SPEC_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../openapi/herald.yaml');

/** A JSON Schema node of the contract, with Herald's reason extensions. */
export interface SchemaNode {
  readonly type?: string;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly required?: readonly string[];
  readonly items?: SchemaNode;
  readonly maxItems?: number;
  readonly 'x-herald-reason'?: string;
  readonly 'x-herald-reasons'?: Readonly<Record<string, string>>;
  readonly [keyword: string]: unknown;
}

let cached: { text: string; document: Record<string, unknown> } | undefined;

/** The contract as written (OpenAPI 3.1), parsed once. Callers must not mutate it. */
export function loadSpec(): { text: string; document: Record<string, unknown> } {
  if (cached === undefined) {
    const text = readFileSync(SPEC_PATH, 'utf8');
    cached = { text, document: parse(text) as Record<string, unknown> };
  }
  return cached;
}

/** A fresh, mutable copy of the contract (openapi-backend dereferences in place). */
export function specDocument(): Record<string, unknown> {
  return structuredClone(loadSpec().document);
}
