import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root: the nearest folder up with package.json, from src/ (tsx, vitest) or dist/src/ (built). */
function packageRoot(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error('cannot find Herald\'s package.json above its sources');
  }
}

const ROOT = packageRoot();

/**
 * The contract Herald loads: the bundle `npm run generate` writes from openapi/herald.yaml and its
 * parts (redocly bundle), every `$ref` local (`#/components/...`). JSON, so no YAML parser at run time.
 */
export const SPEC_PATH = path.join(ROOT, 'generated/openapi.json');

/** The same bundle as YAML, served at `/openapi.yaml`. */
export const SPEC_YAML_PATH = path.join(ROOT, 'generated/openapi.yaml');

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
let cachedYaml: string | undefined;

/** The bundled contract (OpenAPI 3.1): its JSON text and the document, parsed once. Callers must not mutate it. */
export function loadSpec(): { text: string; document: Record<string, unknown> } {
  if (cached === undefined) {
    const text = readFileSync(SPEC_PATH, 'utf8');
    cached = { text, document: JSON.parse(text) as Record<string, unknown> };
  }
  return cached;
}

/** The bundled contract as YAML text, read once. */
export function loadSpecYaml(): string {
  cachedYaml ??= readFileSync(SPEC_YAML_PATH, 'utf8');
  return cachedYaml;
}

/** A fresh, mutable copy of the contract (openapi-backend dereferences in place). */
export function specDocument(): Record<string, unknown> {
  return structuredClone(loadSpec().document);
}
