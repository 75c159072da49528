import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as Yaml from 'yaml';

/** The YAML parser, loaded only when a module's contract needs it (most processes never do). */
const yaml = (): typeof Yaml => createRequire(import.meta.url)('yaml') as typeof Yaml;

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
 * A fresh, mutable copy of the contract (the bundle, or the one `contractWith` merged) with every
 * `$ref` resolved, for openapi-backend (which works on it in place) and the checks built on it.
 * Resolved here because openapi-backend's own dereferencing drops a `$ref`'s siblings, and with
 * them what the contract says there, e.g. `userId: { $ref: Id, x-herald-reason: userId must be … }`.
 */
export function specDocument(document: Record<string, unknown> = loadSpec().document): Record<string, unknown> {
  return dereferenced(structuredClone(document));
}

/** An OpenAPI 3.1 document, as parsed from its JSON or YAML text. */
export type OpenApiDocument = Record<string, unknown>;

/** The contract one process serves: the bundle, with the started modules' own documents merged in. */
export interface Contract {
  readonly document: OpenApiDocument;
  /** What `/openapi.yaml` serves: the bundle's own text when nothing was merged. */
  yaml(): string;
}

/** A capability's own contract file (JSON, or YAML by its extension), read once at start-up. */
export function readContract(file: string | URL): OpenApiDocument {
  const where = typeof file === 'string' ? file : fileURLToPath(file);
  const text = readFileSync(where, 'utf8');
  const parsed: unknown = /\.ya?ml$/.test(where) ? yaml().parse(text) : JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`the contract ${where} is not an OpenAPI document`);
  return parsed as OpenApiDocument;
}

const objectAt = (node: unknown, key: string): Record<string, unknown> => {
  const v = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[key] : undefined;
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
};

/** Every operationId of a document's paths, with where it is. */
function operationIds(document: OpenApiDocument): Map<string, string> {
  const ids = new Map<string, string>();
  for (const [p, item] of Object.entries(objectAt(document, 'paths'))) {
    for (const [method, op] of Object.entries(item as Record<string, unknown>)) {
      const id = objectAt({ op }, 'op')['operationId'];
      if (typeof id === 'string') ids.set(id, `${method.toUpperCase()} ${p}`);
    }
  }
  return ids;
}

/**
 * The bundle with each owner's own document merged in: its paths, its components and its tags.
 * A path, an operationId or a component name declared twice stops start-up, saying by whom; with
 * nothing to merge, the bundle itself (served byte for byte as generated).
 */
export function contractWith(extras: readonly { readonly owner: string; readonly document: OpenApiDocument }[]): Contract {
  if (extras.length === 0) return { document: loadSpec().document, yaml: loadSpecYaml };
  const merged = structuredClone(loadSpec().document);
  const paths = objectAt(merged, 'paths');
  const components = objectAt(merged, 'components');
  const ids = operationIds(merged);
  // By shape: `/mcp/x/{id}` and `/mcp/x/{other}` are one route (the first declared answers it, the other never would).
  const pathOwner = new Map(Object.keys(paths).map((p) => [pathShape(p), { by: 'the bundled contract (openapi/)', path: p }]));
  const componentOwner = new Map<string, string>();
  for (const [section, entries] of Object.entries(components)) for (const name of Object.keys(entries as object)) componentOwner.set(`${section}/${name}`, 'the bundled contract (openapi/)');
  const idOwner = new Map([...ids.keys()].map((id) => [id, 'the bundled contract (openapi/)']));
  for (const { owner, document } of extras) {
    const clash = (what: string, name: string, by: string | undefined): void => {
      if (by !== undefined) throw new Error(`module ${owner}'s contract declares ${what} ${name}, which ${by} declares too: rename it in its contract file`);
    };
    for (const [p, item] of Object.entries(objectAt(document, 'paths'))) {
      const before = pathOwner.get(pathShape(p));
      clash('the path', p, before === undefined ? undefined : before.path === p ? before.by : `${before.by} (as ${before.path})`);
      pathOwner.set(pathShape(p), { by: `module ${owner}`, path: p });
      paths[p] = structuredClone(item);
    }
    for (const [id, where] of operationIds(document)) {
      clash('the operationId', `${id} (${where})`, idOwner.get(id));
      idOwner.set(id, `module ${owner}`);
    }
    for (const [section, entries] of Object.entries(objectAt(document, 'components'))) {
      const into = (components[section] ??= {}) as Record<string, unknown>;
      for (const [name, value] of Object.entries(entries as Record<string, unknown>)) {
        clash('the component', `${section}/${name}`, componentOwner.get(`${section}/${name}`));
        componentOwner.set(`${section}/${name}`, `module ${owner}`);
        into[name] = structuredClone(value);
      }
    }
    const tags = Array.isArray(document['tags']) ? (document['tags'] as { name?: unknown }[]) : [];
    const known = Array.isArray(merged['tags']) ? (merged['tags'] as { name?: unknown }[]) : (merged['tags'] = []);
    for (const tag of tags) if (!known.some((t) => t.name === tag.name)) known.push(structuredClone(tag));
  }
  merged['paths'] = paths;
  merged['components'] = components;
  let text: string | undefined;
  return { document: merged, yaml: () => (text ??= yaml().stringify(merged)) };
}

/** A path as routing matches it: its parameters' names left out. */
function pathShape(p: string): string {
  return p.replace(/\{[^}]*\}/g, '{}');
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
