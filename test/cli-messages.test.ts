import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { COMMAND_HELP } from '../src/cli-help.js';
import { runHerald } from './support/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Each Config field's variable, from its doc comment in src/config-types.ts (`/** \`NAME\`: …`). */
async function variableOfField(): Promise<Map<string, string>> {
  const source = await readFile(path.join(ROOT, 'src/config-types.ts'), 'utf8');
  const map = new Map<string, string>();
  for (const m of source.matchAll(/\/\*\*\s*(?:\*\s*)?`([A-Z][A-Z0-9_]*)`:[\s\S]*?\*\/\s*readonly (\w+)/g)) map.set(m[2] ?? '', m[1] ?? '');
  return map;
}

describe('herald mcp --help', () => {
  it('lists every variable herald mcp reads (a walk of src/mcp/ and its command in src/cli.ts, so the list cannot drift)', async () => {
    const fields = new Set<string>();
    const files = (await readdir(path.join(ROOT, 'src/mcp'))).filter((f) => f.endsWith('.ts')).map((f) => path.join(ROOT, 'src/mcp', f));
    for (const file of files) for (const m of (await readFile(file, 'utf8')).matchAll(/\bconfig\.(\w+)/g)) fields.add(m[1] ?? '');
    const cli = await readFile(path.join(ROOT, 'src/cli.ts'), 'utf8');
    const mcpCase = cli.slice(cli.indexOf("case 'mcp':"), cli.indexOf("case 'commands':"));
    for (const m of mcpCase.matchAll(/\bconfig\.(\w+)/g)) fields.add(m[1] ?? '');
    const variables = await variableOfField();
    const read = [...fields].map((f) => variables.get(f) ?? `(no variable documented for config.${f})`).sort();
    // The ones a newcomer was missing, among all the others.
    expect(read).toEqual(expect.arrayContaining(['HERALD_POLICY', 'HERALD_MCP_OAUTH_ISSUER', 'HERALD_MCP_INBOX_NOTIFY', 'MCP_BRIDGE_TOKEN']));
    const listed = new Set([...COMMAND_HELP.mcp.matchAll(/^ {2}([A-Z][A-Z0-9_]+) /gm)].map((m) => m[1]));
    expect(read.filter((v) => !listed.has(v))).toEqual([]);
  });
});

describe('herald mcp without a bridge token', () => {
  it('names the file it looked in for the sandbox token', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-no-token-'));
    try {
      const proc = runHerald(['mcp'], { HERALD_DATA_DIR: dataDir });
      expect((await proc.exited).code).toBe(2);
      await proc.closed;
      expect(proc.output()).toContain(`no sandbox token was found in ${path.join(dataDir, 'sandbox-tokens.json')} (HERALD_DATA_DIR;`);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
