import { parseArgs, type ParseArgsConfig } from 'node:util';

type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;

// The command line of the scripts a person runs from npm (`npm run bench`, `npm run chaos`,
// `npm run fuzz`): one reading for all three. `--help` prints the usage and starts nothing; a flag
// the script does not take, or a value it refuses, is named and exits 2 with the usage; nothing
// is ignored. Each script then says up front how long the run will take (formatDuration).

/** A value the script refuses (a malformed number, an unknown phase): exit 2, naming it. */
export class UsageError extends Error {}

type Values<O extends ParseArgsOptionsConfig> = ReturnType<typeof parseArgs<{ options: O; strict: true; allowPositionals: false }>>['values'];

/**
 * Read `argv` against `options` (node's util.parseArgs, strict: `--name value` and `--name=value`
 * both work). `--help`/`-h` prints `usage` and exits 0; an unknown flag, a stray argument or a
 * missing value prints what was wrong and the usage, and exits 2. `--dry-run` is every script's:
 * announceEstimate then exits after printing the estimate.
 */
export function scriptArgs<const O extends ParseArgsOptionsConfig>(script: string, usage: string, options: O, argv: readonly string[] = process.argv.slice(2)): Values<O> {
  // Asked anywhere, even beside a flag it would refuse: help never starts anything.
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage);
    process.exit(0);
  }
  try {
    const rest = argv.filter((a) => a !== '--dry-run');
    dryRun = rest.length < argv.length;
    return parseArgs({ args: rest, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    return refuse(script, usage, err instanceof Error ? err.message : String(err));
  }
}

let dryRun = false;

/**
 * Say how long the run will take, before anything starts. With `--dry-run` (every script takes it)
 * that is all: it exits 0 having started nothing.
 */
export function announceEstimate(line: string): void {
  console.log(`estimated: ${line}${dryRun ? '' : '; Ctrl-C stops and cleans up'}`);
  if (dryRun) process.exit(0);
}

/** Print `message` and the usage to stderr and exit 2 (for values scriptArgs cannot check itself). */
export function refuse(script: string, usage: string, message: string): never {
  console.error(`${script}: ${message.replace(/\. To specify a positional argument.*$/s, '')}\n\n${usage}`);
  process.exit(2);
}

/** A non-negative integer flag's value, `fallback` when absent; UsageError below `min` or malformed. */
export function intFlag(raw: string | undefined, fallback: number, name: string, min = 0): number {
  if (raw === undefined) return fallback;
  if (!/^[0-9]{1,10}$/.test(raw) || Number(raw) < min) throw new UsageError(`--${name} must be an integer ≥ ${min} (got ${JSON.stringify(raw)})`);
  return Number(raw);
}

/** 45 s, 3 min, 1 h 05 min: how long something will take, to the precision an estimate has. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.round(s / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}
