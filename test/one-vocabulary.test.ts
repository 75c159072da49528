import { describe, expect, it } from 'vitest';
import { mcpTools } from '../src/mcp/tools.js';
import { contractOf } from '../src/modules/http-api.js';
import { MODULES } from '../src/modules/modules.js';

/**
 * One name per idea, across the API and herald mcp: a walk over every operation's input names
 * (path and query parameters, the JSON body's fields) and every tool's input properties. Two names
 * are the same idea when they differ only in spelling (channelId, channel_id), in a unit suffix
 * (timeout_ms, timeout_seconds), or are listed as synonyms below. The only second name allowed is
 * a deprecated alias a tool keeps beside the one the API uses (its description starts "Deprecated").
 */

/** Names that mean the same idea though they are spelled apart: each maps to the idea it names. */
const SYNONYMS: Readonly<Record<string, string>> = {
  discord_user_id: 'userid',
};

/**
 * Second names that predate this walk, each kept because a published contract fixes it: a caller
 * written against it sends it. A new entry here needs a reason as good.
 */
const KNOWN: Readonly<Record<string, string>> = {
  // The command registry's and the media archive's contracts are camelCase throughout (their bodies and query parameters).
  channelId: 'openapi/commands.yaml (runCommand) and openapi/archive.yaml (startMediaScrape, queryMedia) take channelId',
  userId: 'openapi/commands.yaml (runCommand) takes userId',
  guildId: 'openapi/commands.yaml (runCommand) and openapi/archive.yaml (queryMedia) take guildId',
  scrapeId: "openapi/archive.yaml's queryMedia takes scrapeId (its paths say scrape_id), and so do the archive's tools",
  itemId: "get_media_item takes itemId (getMediaItem's path says item_id)",
  // Chat names a channel `channel` (a name or an id, any platform); files, handoffs and destination mappings a channel's id.
  channel_id: 'openapi/files.yaml, openapi/handoffs.yaml and openapi/admin.yaml (setDestinationMapping) take channel_id',
};

/** The idea a name stands for: its synonym's, else the name without case, underscores or a unit suffix. */
function idea(name: string): string {
  const synonym = SYNONYMS[name];
  if (synonym !== undefined) return synonym;
  return name
    .replace(/_(ms|seconds|secs|s)$/i, '')
    .replace(/(Ms|Seconds)$/, '')
    .replace(/_id$|Id$/, 'id')
    .replace(/_/g, '')
    .toLowerCase()
    .replace(/^channel$/, 'channelid');
}

type Node = Record<string, unknown>;
const doc = contractOf(MODULES).document as { paths: Record<string, Record<string, Node>>; components?: { schemas?: Record<string, Node>; parameters?: Record<string, Node> } };

/** A local `$ref` followed (the bundle's components). */
function resolve(node: unknown): Node | undefined {
  let at = node as Node | undefined;
  for (let i = 0; i < 10 && at !== undefined && typeof at['$ref'] === 'string'; i++) {
    const ref = at['$ref'] as string;
    if (!ref.startsWith('#/')) return undefined;
    at = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((o, k) => (o as Node | undefined)?.[k], doc) as Node | undefined;
  }
  return at;
}

/** The property names of a body schema, through allOf / oneOf / anyOf. */
function fields(schema: unknown): string[] {
  const s = resolve(schema);
  if (s === undefined) return [];
  const own = Object.keys((s['properties'] as Node | undefined) ?? {});
  const parts = ['allOf', 'oneOf', 'anyOf'].flatMap((k) => ((s[k] as unknown[] | undefined) ?? []).flatMap(fields));
  return [...own, ...parts];
}

/** Where each name is used: `op <operationId>` or `tool <name>`, with whether it is a deprecated alias. */
const uses = new Map<string, { where: string; deprecated: boolean; beside: string[] }[]>();
const use = (name: string, where: string, deprecated: boolean, beside: string[]): void => {
  uses.set(name, [...(uses.get(name) ?? []), { where, deprecated, beside }]);
};

for (const item of Object.values(doc.paths)) {
  for (const op of Object.values(item)) {
    if (typeof op !== 'object' || typeof op['operationId'] !== 'string') continue;
    const params = [...((item['parameters'] as unknown[] | undefined) ?? []), ...((op['parameters'] as unknown[] | undefined) ?? [])].map(resolve).flatMap((p) => (typeof p?.['name'] === 'string' && (p['in'] === 'query' || p['in'] === 'path') ? [p['name']] : []));
    const body = fields((resolve(op['requestBody'])?.['content'] as Node | undefined)?.['application/json'] === undefined ? undefined : ((resolve(op['requestBody'])?.['content'] as Node)['application/json'] as Node)['schema']);
    const names = [...new Set([...params, ...body])];
    for (const n of names) use(n, `op ${op['operationId']}`, false, names);
  }
}
for (const tool of mcpTools()) {
  const props = (tool.inputSchema['properties'] as Record<string, Node> | undefined) ?? {};
  const names = Object.keys(props);
  for (const [n, schema] of Object.entries(props)) use(n, `tool ${tool.name}`, typeof schema['description'] === 'string' && schema['description'].startsWith('Deprecated'), names);
}

describe('one name per idea across the API and the MCP tools', () => {
  it('finds the operations and tools to walk', () => {
    expect([...uses.values()].flat().filter((u) => u.where.startsWith('op ')).length).toBeGreaterThan(40);
    expect([...uses.values()].flat().filter((u) => u.where.startsWith('tool ')).length).toBeGreaterThan(40);
  });

  it('the same idea has one name, or a deprecated alias beside it', () => {
    const byIdea = new Map<string, string[]>();
    for (const name of uses.keys()) byIdea.set(idea(name), [...(byIdea.get(idea(name)) ?? []), name]);
    const problems: string[] = [];
    for (const [, names] of byIdea) {
      if (names.length < 2) continue;
      for (const name of names) {
        if (Object.hasOwn(KNOWN, name)) continue;
        const others = names.filter((n) => n !== name);
        // Allowed: this name is used only as a deprecated alias, beside one of the others, wherever it is used.
        const aliasOnly = (uses.get(name) ?? []).every((u) => u.deprecated && u.beside.some((b) => others.includes(b)));
        if (aliasOnly) continue;
        // The idea's own name: one the API uses, snake_case (the protocol's style) before camelCase, then the most used.
        const rank = (n: string): number[] => [(uses.get(n) ?? []).some((u) => u.where.startsWith('op ')) ? 0 : 1, /[A-Z]/.test(n) ? 1 : 0, -(uses.get(n) ?? []).length];
        const main = [...names].sort((a, b) => rank(a).map((x, i) => x - (rank(b)[i] ?? 0)).find((d) => d !== 0) ?? a.localeCompare(b))[0];
        if (name === main) continue;
        problems.push(`${name} (${(uses.get(name) ?? []).map((u) => u.where).join(', ')}) names what ${main} names`);
      }
    }
    expect(problems).toEqual([]);
  });
});
