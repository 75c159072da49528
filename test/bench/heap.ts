/**
 * `npm run bench -- --only=idle --heap`: where an idle Herald's resident memory is. The idle phase
 * starts Herald with HEAP_NODE_OPTIONS and, after reading its RSS, hands its pid here:
 *
 * - the resident set by kind of mapping (/proc/PID/smaps): V8's heap pages (256 KiB anonymous
 *   mappings; under tsx they include the module-hooks thread's own heap), other anonymous memory
 *   (malloc arenas, WASM), the node binary and libraries, the brk heap;
 * - a heap snapshot of the main isolate (written to the bench's output folder), summarised: its
 *   self size by V8 node type, the loaded modules' source text by package (V8 keeps every loaded
 *   script's source), the largest object constructors, and the largest other strings.
 *
 * The numbers are read from the process itself; nothing is compared here (the idle RSS is).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

/** NODE_OPTIONS for the Herald to look into: a heap snapshot on SIGUSR2, written to `dir`. */
export const heapNodeOptions = (dir: string): string => `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`;

const mb = (bytes: number): number => Math.round((bytes / 1_048_576) * 10) / 10;

/** RSS by kind of mapping, MB. */
async function smapsBreakdown(pid: number): Promise<Record<string, number>> {
  const text = await readFile(`/proc/${pid}/smaps`, 'utf8');
  const kinds: Record<string, number> = { 'V8 heap pages (256 KiB anon)': 0, 'other anon': 0, 'brk heap': 0, 'files (node, libraries)': 0 };
  let kind = 'other anon';
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      const size = parseInt(head[2] ?? '0', 16) - parseInt(head[1] ?? '0', 16);
      const name = head[3] ?? '';
      kind = name === '[heap]' ? 'brk heap' : name.startsWith('/') ? 'files (node, libraries)' : name === '' && size === 256 * 1024 ? 'V8 heap pages (256 KiB anon)' : 'other anon';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) kinds[kind] = (kinds[kind] ?? 0) + Number(rss[1]) * 1024;
  }
  return Object.fromEntries(Object.entries(kinds).map(([k, v]) => [k, mb(v)]));
}

/** Signal `pid` and wait for its new snapshot in `dir` to be complete (its size stops changing). */
async function takeSnapshot(pid: number, dir: string): Promise<string> {
  const before = new Set(await readdir(dir));
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 120_000;
  let last = -1;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`no heap snapshot from ${pid} in ${dir}`);
    await new Promise((r) => setTimeout(r, 1_000));
    const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (file === undefined) continue;
    const size = (await stat(path.join(dir, file))).size;
    if (size > 0 && size === last) return path.join(dir, file);
    last = size;
  }
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** The package (or `src`, `migrations`, …) a script's URL belongs to. */
function packageOf(url: string): string {
  const inModules = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (inModules !== null) return inModules[1] ?? url;
  const own = /\/(src|migrations|generated|test)\//.exec(url);
  return own !== null ? (own[1] ?? url) : url.startsWith('node:') ? 'node:*' : url;
}

const top = (m: Map<string, number>, n: number): [string, number][] => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
const add = (m: Map<string, number>, k: string, v: number): void => void m.set(k, (m.get(k) ?? 0) + v);

/** Summarise a snapshot: self size by type, script source by package, constructors, big strings. */
function summarise(s: Snapshot): { byType: Map<string, number>; sources: Map<string, number>; constructors: Map<string, number>; strings: [number, string][]; total: number } {
  const { node_fields: nf, node_types, edge_fields: ef, edge_types } = s.snapshot.meta;
  const types = node_types[0];
  const etypes = edge_types[0];
  const N = nf.length;
  const E = ef.length;
  const [iT, iN, iS, iE] = ['type', 'name', 'self_size', 'edge_count'].map((f) => nf.indexOf(f)) as [number, number, number, number];
  const [eT, eN, eTo] = ['type', 'name_or_index', 'to_node'].map((f) => ef.indexOf(f)) as [number, number, number];
  const { nodes, edges, strings } = s;
  const at = (i: number, f: number): number => nodes[i + f] ?? 0;
  const byType = new Map<string, number>();
  const constructors = new Map<string, number>();
  const sources = new Map<string, number>();
  const sourceNodes = new Set<number>();
  let total = 0;
  let e = 0;
  for (let i = 0; i < nodes.length; i += N) {
    const type = types[at(i, iT)] ?? '?';
    const name = strings[at(i, iN)] ?? '';
    const size = at(i, iS);
    total += size;
    add(byType, type, size);
    if (type === 'object' || type === 'closure') add(constructors, `${type} ${name}`, size);
    const count = at(i, iE);
    // A script is a `code` node named by its URL, with a `source` edge to its text.
    if (type === 'code' && (name.startsWith('/') || name.startsWith('file://') || name.startsWith('node:'))) {
      for (let k = e; k < e + count * E; k += E) {
        if (etypes[edges[k + eT] ?? 0] === 'internal' && strings[edges[k + eN] ?? 0] === 'source') {
          const to = edges[k + eTo] ?? 0;
          if (!sourceNodes.has(to)) {
            sourceNodes.add(to);
            add(sources, packageOf(name), at(to, iS));
          }
        }
      }
    }
    e += count * E;
  }
  const big: [number, string][] = [];
  for (let i = 0; i < nodes.length; i += N) {
    if (types[at(i, iT)] === 'string' && at(i, iS) > 65_536 && !sourceNodes.has(i)) big.push([at(i, iS), (strings[at(i, iN)] ?? '').slice(0, 70).replace(/\s+/g, ' ')]);
  }
  big.sort((a, b) => b[0] - a[0]);
  return { byType, sources, constructors, strings: big.slice(0, 8), total };
}

/**
 * Where `pid`'s memory is (it must have been started with heapNodeOptions(dir)): prints the
 * breakdowns and returns the main ones as fields for the bench's JSON row.
 */
export async function heapReport(pid: number, dir: string): Promise<Record<string, number | string>> {
  const maps = await smapsBreakdown(pid);
  const file = await takeSnapshot(pid, dir);
  const s = summarise(JSON.parse(await readFile(file, 'utf8')) as Snapshot);
  const sourceTotal = [...s.sources.values()].reduce((a, b) => a + b, 0);
  const list = (pairs: [string, number][]): string => pairs.map(([k, v]) => `${k} ${mb(v)}`).join(', ');
  console.log(`  heap: RSS by mapping (MB): ${JSON.stringify(maps)}`);
  console.log(`  heap: snapshot ${file}: ${mb(s.total)} MB of objects; by type (MB): ${list(top(s.byType, 8))}`);
  console.log(`  heap: loaded modules' source text ${mb(sourceTotal)} MB, by package (MB): ${list(top(s.sources, 12))}`);
  console.log(`  heap: largest constructors (self MB): ${list(top(s.constructors, 10))}`);
  console.log(`  heap: largest other strings: ${s.strings.map(([n, t]) => `${mb(n)} MB "${t}"`).join('; ')}`);
  return {
    ...Object.fromEntries(Object.entries(maps).map(([k, v]) => [`idle RSS ${k} MB`, v])),
    'idle snapshot MB': mb(s.total),
    'idle module source MB': mb(sourceTotal),
    'idle snapshot file': file,
  };
}
