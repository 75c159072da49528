import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../src/cli-help.js';
import { distIsFresh, runCommand } from './support/process.js';

/**
 * Every script a person runs from package.json answers `--help` at once and starts nothing,
 * refuses a flag it does not take (exit 2, naming it), and the long ones say how long they will
 * take before starting (`--dry-run` prints only that). The scripts are found in package.json, so
 * one added there is walked too.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Help is read before any module does work: well inside this, even under tsx on a loaded machine. */
const FAST_MS = 20_000;

interface Script {
  /** How a person runs it. */
  name: string;
  /** node's arguments for it. */
  argv: string[];
  /** Whether it runs something long enough to announce an estimate. */
  long: boolean;
}

async function scripts(): Promise<Script[]> {
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const found: Script[] = [];
  for (const [name, command] of Object.entries(pkg.scripts)) {
    const tsx = /^tsx (test\/\S+\.ts)$/.exec(command);
    if (tsx?.[1] !== undefined) found.push({ name: `npm run ${name}`, argv: ['--import', 'tsx', tsx[1]], long: true });
  }
  // The herald CLI and each command of it, as npm start, npm run herald and npm run mcp run it:
  // bin/herald.js, the compiled CLI in dist/ (built by npm ci); through tsx when dist/ is older
  // than the sources, so a checkout with an edit not yet built tests the edit.
  const cli = distIsFresh() ? ['bin/herald.js'] : ['--import', 'tsx', 'src/cli.ts'];
  for (const command of COMMANDS) {
    found.push({ name: `herald ${command}`, argv: [...cli, ...(command === 'commands' ? ['commands', 'register'] : [command])], long: false });
  }
  return found;
}

async function run(argv: string[], env: Record<string, string>): Promise<{ code: number | null; output: string; ms: number }> {
  const started = performance.now();
  const proc = runCommand(process.execPath, argv, env);
  const exit = await proc.exited;
  await proc.closed;
  return { code: exit.code, output: proc.output(), ms: performance.now() - started };
}

describe("the scripts' command lines", { timeout: 180_000 }, () => {
  it('finds the benchmark, the chaos campaign, the fuzzer and every herald command', async () => {
    const names = (await scripts()).map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['npm run bench', 'npm run chaos', 'npm run fuzz', 'herald serve', 'herald mcp']));
  });

  it('answer --help fast and start nothing; refuse an unknown flag naming it (exit 2); the long ones estimate their duration first', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-scripts-help-'));
    try {
      // An environment each would start in: sandbox mode with PGlite in dataDir, free ports, no PostgreSQL to reach.
      const env = { HERALD_DATA_DIR: dataDir, PORT: '0', HERALD_MCP_PORT: '0', TEST_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
      const all = await scripts();
      // Two at a time: the machine has two cores.
      const results: { script: Script; help: Awaited<ReturnType<typeof run>>; unknown: Awaited<ReturnType<typeof run>>; dry?: Awaited<ReturnType<typeof run>> }[] = [];
      for (let i = 0; i < all.length; i += 2) {
        results.push(
          ...(await Promise.all(
            all.slice(i, i + 2).map(async (script) => ({
              script,
              help: await run([...script.argv, '--help'], env),
              unknown: await run([...script.argv, '--no-such-flag'], env),
              ...(script.long ? { dry: await run([...script.argv, '--dry-run'], env) } : {}),
            })),
          )),
        );
      }
      for (const { script, help, unknown, dry } of results) {
        expect({ script: script.name, code: help.code }, help.output).toEqual({ script: script.name, code: 0 });
        expect(help.output, script.name).toMatch(/^usage: /);
        expect(help.output, script.name).toContain('--help');
        expect(help.ms, `${script.name} --help took ${Math.round(help.ms)} ms`).toBeLessThan(FAST_MS);
        // Nothing started: no estimate announced, no log line, no machine or seed line.
        expect(help.output, script.name).not.toMatch(/estimated: |"level"|machine: |seed \d/);
        if (script.long) expect(help.output, `${script.name}'s help says how long it takes`).toMatch(/takes about \d+ minutes/);

        expect({ script: script.name, code: unknown.code }, unknown.output).toEqual({ script: script.name, code: 2 });
        expect(unknown.output, script.name).toContain('--no-such-flag');
        expect(unknown.output, script.name).not.toMatch(/estimated: |"level"/);

        if (dry !== undefined) {
          expect({ script: script.name, code: dry.code }, dry.output).toEqual({ script: script.name, code: 0 });
          expect(dry.output, script.name).toMatch(/^estimated: about \d+ (s|min|h \d\d min) \(.+ ~\d/);
          expect(dry.output.trim().split('\n'), script.name).toHaveLength(1);
        }
      }
      // Nothing written where Herald keeps its data.
      expect(await readdir(dataDir)).toEqual([]);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('estimate what the options choose: fewer phases, less time', async () => {
    const env = { TEST_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    const minutes = (out: string): number => {
      const m = /^estimated: about (?:(\d+) h )?(\d+) (s|min)/.exec(out);
      if (m === null) throw new Error(out);
      return Number(m[1] ?? 0) * 60 + (m[3] === 's' ? Number(m[2]) / 60 : Number(m[2]));
    };
    const [full, quick, reads, chaosAll, chaosOne] = await Promise.all([
      run(['--import', 'tsx', 'test/bench/run.ts', '--dry-run'], env),
      run(['--import', 'tsx', 'test/bench/run.ts', '--dry-run', '--quick'], env),
      run(['--import', 'tsx', 'test/bench/run.ts', '--dry-run', '--quick', '--only=reads'], env),
      run(['--import', 'tsx', 'test/chaos/run.ts', '--dry-run'], env),
      run(['--import', 'tsx', 'test/chaos/run.ts', '--dry-run', '--phase', 'slack', '--duration', '30'], env),
    ]);
    expect(minutes(quick.output)).toBeLessThan(minutes(full.output));
    expect(minutes(reads.output)).toBeLessThan(minutes(quick.output));
    expect(reads.output).toMatch(/\(reads ~/);
    expect(minutes(chaosOne.output)).toBeLessThan(minutes(chaosAll.output));
    expect(chaosOne.output).toMatch(/\(slack ~/);
  });
});
