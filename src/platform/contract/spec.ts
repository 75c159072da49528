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

/**
 * A fresh, mutable copy of the contract with every `$ref` resolved, for openapi-backend (which
 * works on it in place) and the checks built on it. Resolved here because openapi-backend's own
 * dereferencing drops a `$ref`'s siblings, and with them what the contract says there, e.g.
 * `userId: { $ref: Id, x-herald-reason: userId must be … }`.
 */
export function specDocument(): Record<string, unknown> {
  return dereferenced(structuredClone(loadSpec().document));
}

/** Keywords that only annotate a schema: a `$ref`'s siblings of these kinds are laid over its target. */
const ANNOTATIONS = new Set(['description', 'title', 'example', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly', '$comment']);

/**
 * `document` with every local `$ref` (`#/...`) replaced by its target, as OpenAPI 3.1 reads one
 * with siblings: the siblings apply too. Annotations and `x-*` extensions are laid over the target;
 * a sibling that constrains (a keyword the target has too, with another value) keeps both through
 * `allOf`. A `$ref` without siblings is the target itself, shared (as openapi-backend shares it),
 * cycles included.
 */
export function dereferenced<T>(document: T): T {
  const targets = new Map<string, unknown>();
  const building = new Set<string>();
  const target = (ref: string): unknown => {
    const known = targets.get(ref);
    if (known !== undefined) return known;
    if (!ref.startsWith('#/')) throw new Error(`the contract's bundle has a $ref that is not local: ${ref}`);
    let node: unknown = document;
    for (const token of ref.slice(2).split('/')) {
      const key = decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~');
      node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[key] : undefined;
    }
    if (typeof node !== 'object' || node === null || Array.isArray(node)) throw new Error(`the contract's $ref ${ref} does not name an object`);
    // Registered before it is filled, so a cycle resolves to this same object.
    const resolved: Record<string, unknown> = {};
    targets.set(ref, resolved);
    building.add(ref);
    Object.assign(resolved, resolve(node));
    building.delete(ref);
    return resolved;
  };
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (typeof node !== 'object' || node === null) return node;
    const { $ref, ...rest } = node as Record<string, unknown>;
    const own = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, resolve(v)]));
    if (typeof $ref !== 'string') return own;
    const base = target($ref) as Record<string, unknown>;
    if (Object.keys(own).length === 0) return base;
    if (building.has($ref)) throw new Error(`the contract's $ref ${$ref} has siblings inside a cycle`);
    const constrains = Object.entries(own).some(([k, v]) => !ANNOTATIONS.has(k) && !k.startsWith('x-') && k in base && JSON.stringify(base[k]) !== JSON.stringify(v));
    return constrains ? { allOf: [base], ...own } : { ...base, ...own };
  };
  return resolve(document) as T;
}
