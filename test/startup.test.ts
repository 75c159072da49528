import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { heraldEnv, IDS, newToken } from './support/herald.js';
import { runCommand, runHerald, startHeraldProcess } from './support/process.js';
import { holdDataDir } from './support/lock-holder.js';
import { freePort } from './support/ports.js';
import { waitFor } from './support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** A stack trace line: start-up problems are reported in words, never with one. */
const STACK_LINE = /^\s+at /m;

async function occupy(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { port: (server.address() as { port: number }).port, server };
}

describe('the compiled CLI (bin/herald.js runs dist/, built by npm ci)', () => {
  it('prints its usage', async () => {
    const proc = runHerald(['--help'], {}, { built: true });
    expect((await proc.exited).code).toBe(0);
    expect(proc.output()).toContain('usage: herald [command] [options]');
  });

  // The moment Herald says it is up, whoever reads that may stop it: a signal before the handler
  // was installed killed the process outright (exit by SIGINT, no graceful stop), about one run in
  // two when the signal went out on the line's first byte. Several runs, each signalled at once.
  it('stops gracefully on a SIGINT sent the moment `herald mcp --http` says it is listening', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-ready-'));
    try {
      const token = newToken();
      const env = { HERALD_DATA_DIR: dataDir, MCP_BRIDGE_TOKEN: token, HERALD_MCP_TOKEN: token, HERALD_MCP_PORT: '0' };
      const exits: { code: number | null; signal: NodeJS.Signals | null }[] = [];
      for (let i = 0; i < 8; i++) {
        const proc = runHerald(['mcp', '--http'], env, { built: true });
        let seen = '';
        proc.child.stderr?.on('data', (d: Buffer) => {
          seen += d.toString();
          if (seen.includes('Streamable HTTP at') && proc.child.pid !== undefined && proc.child.exitCode === null) {
            seen = '';
            process.kill(proc.child.pid, 'SIGINT');
          }
        });
        exits.push(await proc.exited);
        await proc.closed;
      }
      expect(exits).toEqual(Array.from({ length: 8 }, () => ({ code: 0, signal: null })));
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('answers --help and -h for every command with its usage and options, and starts nothing', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-help-'));
    try {
      // An environment each command would start in: sandbox mode, PGlite in dataDir, tokens for mcp.
      const token = newToken();
      const env = { HERALD_DATA_DIR: dataDir, MCP_BRIDGE_TOKEN: token, HERALD_MCP_TOKEN: token, PORT: '0', HERALD_MCP_PORT: '0' };
      const asks = [
        ['serve'],
        ['dispatch'],
        ['migrate'],
        ['mcp'],
        ['mcp', '--http'],
        ['commands'],
        ['commands', 'register'],
      ].flatMap((args) => [
        [...args, '--help'],
        [...args, '-h'],
      ]);
      const answers = await Promise.all(
        asks.map(async (args) => {
          const proc = runHerald(args, env, { built: true });
          const exit = await proc.exited;
          // Its output is whole only once its pipes have closed, which can come after the exit.
          await proc.closed;
          return { args, exit, output: proc.output() };
        }),
      );
      for (const { args, exit, output } of answers) {
        const command = args[0] === 'commands' ? 'commands register' : args[0];
        expect({ args, exit }).toEqual({ args, exit: { code: 0, signal: null } });
        expect(output.startsWith(`usage: herald ${command}`), `${args.join(' ')}:\n${output}`).toBe(true);
        expect(output).toContain('options:\n');
        expect(output).toContain('-h, --help');
        expect(output).not.toContain('"level"');
      }
      expect(answers.find((a) => a.args.join(' ') === 'mcp --help')?.output).toContain('--http');
      // Nothing started: no database, no sandbox tokens, no lock in the data folder.
      expect(await readdir(dataDir)).toEqual([]);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('prints the package version for --version', async () => {
    const { version } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const proc = runHerald(['--version'], {}, { built: true });
    expect((await proc.exited).code).toBe(0);
    expect(proc.output()).toBe(`${version}\n`);
  });

  it('refuses an option a command does not take, saying where settings come from', async () => {
    const proc = runHerald(['serve', '--port', '9000'], {}, { built: true });
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toBe('herald serve: unexpected "--port": settings come from the environment (see herald serve --help)\n');
  });

  it('loads no Discord client, web framework or database driver for --help: the CLI imports those per command', async () => {
    // What runs before a command is chosen is the compiled CLI's static import graph.
    const loaded = new Set<string>();
    const packages = new Set<string>();
    const visit = async (file: string): Promise<void> => {
      if (loaded.has(file)) return;
      loaded.add(file);
      const code = await readFile(file, 'utf8');
      for (const [, specifier] of code.matchAll(/^(?:import|export)\s(?:[^'";]*?\sfrom\s)?['"]([^'"]+)['"]/gm)) {
        if (specifier === undefined) continue;
        if (specifier.startsWith('.')) await visit(path.resolve(path.dirname(file), specifier));
        else packages.add(specifier);
      }
    };
    await visit(path.join(ROOT, 'dist/src/cli.js'));
    const heavy = [...packages].filter((p) => /^(discord\.js|@discordjs|koa|@koa|pg|@electric-sql|kysely|@modelcontextprotocol|openapi-backend|ws|pino)/.test(p));
    expect(heavy).toEqual([]);
  });

  it('says how to build it when dist/ is missing', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-nodist-'));
    await mkdir(path.join(dir, 'bin'));
    await copyFile(path.join(ROOT, 'bin/herald.js'), path.join(dir, 'bin/herald.js'));
    const proc = runCommand(process.execPath, [path.join(dir, 'bin/herald.js'), '--help'], {});
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toMatch(/the compiled CLI \(.*dist\/src\/cli\.js\) is missing: run `npm run build`/);
    expect(proc.output()).not.toMatch(STACK_LINE);
  });
});

describe('start-up fails fast, in plain words', () => {
  let db: TestDatabase;
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    db = await testDatabase();
    sandbox = await new DiscordSandbox().start();
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.drop();
  });

  it('exits 2 naming PORT when the API port is in use, before anything starts', async () => {
    const taken = await occupy();
    try {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-port-'));
      const proc = runHerald(['serve'], { PORT: String(taken.port), HERALD_SANDBOX_PORT: '0', HERALD_DATA_DIR: dataDir }, { built: true });
      expect((await proc.exited).code).toBe(2);
      expect(proc.output()).toContain(`herald: port ${taken.port} on 127.0.0.1 is already in use: set PORT to a free port, or stop what is using it`);
      expect(proc.output()).not.toMatch(STACK_LINE);
      // Nothing started: not even the sandbox tokens were written.
      await expect(readFile(path.join(dataDir, 'sandbox-tokens.json'))).rejects.toThrow(/ENOENT/);
    } finally {
      taken.server.close();
    }
  });

  it('exits 2 naming HERALD_SANDBOX_PORT when the sandbox port is in use (no WebSocket stack trace)', async () => {
    const taken = await occupy();
    try {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-port-'));
      const proc = runHerald(['serve'], { PORT: '0', HERALD_SANDBOX_PORT: String(taken.port), HERALD_DATA_DIR: dataDir });
      expect((await proc.exited).code).toBe(2);
      expect(proc.output()).toContain(`herald: port ${taken.port} on 127.0.0.1 is already in use: set HERALD_SANDBOX_PORT to a free port`);
      expect(proc.output()).not.toMatch(STACK_LINE);
      // Lost the race after the check: the sandbox's listen fails as an ordinary rejection, no
      // unhandled 'error' event from its WebSocket server.
      await expect(new DiscordSandbox().start(taken.port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    } finally {
      taken.server.close();
    }
  });

  it('exits 2 naming HERALD_METRICS_PORT when the metrics port is in use, before anything starts', async () => {
    const taken = await occupy();
    try {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-port-'));
      const started = Date.now();
      const proc = runHerald(['serve'], { PORT: '0', HERALD_METRICS_PORT: String(taken.port), HERALD_DATA_DIR: dataDir }, { built: true });
      expect((await proc.exited).code).toBe(2);
      const elapsedMs = Date.now() - started;
      expect(proc.output()).toBe(`herald: port ${taken.port} on 127.0.0.1 is already in use: set HERALD_METRICS_PORT to a free port (or off), or stop what is using it\n`);
      // Nothing started: no sandbox tokens, no store, no log line; it took a moment, not a start-up.
      await expect(readFile(path.join(dataDir, 'sandbox-tokens.json'))).rejects.toThrow(/ENOENT/);
      expect(elapsedMs).toBeLessThan(10_000);
    } finally {
      taken.server.close();
    }
  });

  it('exits 2 when two variables name one port', async () => {
    const port = await freePort();
    const proc = runHerald(['serve'], { PORT: String(port), HERALD_METRICS_PORT: String(port), HERALD_DATA_DIR: path.join(tmpdir(), 'unused') }, { built: true });
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toBe(`herald: PORT and HERALD_METRICS_PORT are both ${port}: give each its own port\n`);
  });

  it('exits 2 saying what to do when another process holds the data folder', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-locked-'));
    let holder: Awaited<ReturnType<typeof holdDataDir>> | undefined;
    try {
      // A live process holds the lock, as a running Herald would.
      holder = await holdDataDir(dataDir);
      const expected = `herald: HERALD_DATA_DIR (${dataDir}) is in use by process ${holder.pid}: embedded PGlite serves one process. Stop that process, set HERALD_DATA_DIR to another folder, or set DATABASE_URL to share one PostgreSQL database\n`;
      for (const command of ['serve', 'migrate']) {
        const proc = runHerald([command], { PORT: '0', HERALD_DATA_DIR: dataDir }, { built: true });
        expect({ command, exit: await proc.exited }).toEqual({ command, exit: { code: 2, signal: null } });
        expect(proc.output()).toBe(expected);
      }
      expect((await readdir(dataDir)).sort()).toEqual(['pglite.lock']);
    } finally {
      holder?.proc.kill('SIGKILL');
      await holder?.proc.closed;
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('exits 2 saying what to do when HERALD_DATA_DIR cannot be written', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-notdir-'));
    try {
      await writeFile(path.join(dir, 'file'), '');
      const dataDir = path.join(dir, 'file', 'data');
      const proc = runHerald(['serve'], { PORT: '0', HERALD_DATA_DIR: dataDir }, { built: true });
      expect((await proc.exited).code).toBe(2);
      expect(proc.output()).toBe(`herald: cannot write to HERALD_DATA_DIR (${dataDir}): ENOTDIR: set HERALD_DATA_DIR to a folder Herald may write\n`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('exits 2 saying what to do when the database cannot be reached', async () => {
    const url = `postgres://herald@127.0.0.1:${await freePort()}/herald`;
    const proc = runHerald(['migrate'], { DATABASE_URL: url, HERALD_DB_STARTUP_TIMEOUT_MS: '0' }, { built: true });
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toContain(`herald: cannot reach the database at DATABASE_URL (${url}): connect ECONNREFUSED`);
    expect(proc.output()).toContain(': start PostgreSQL there, or set DATABASE_URL to where it runs\n');
    expect(proc.output()).not.toMatch(STACK_LINE);
  });

  it('stops with "Discord rejected DISCORD_TOKEN (401)" when Discord refuses the token', async () => {
    const wrong = `wrong.${newToken()}`;
    const env = heraldEnv({ sandbox, db, bridgeToken: newToken(), adminToken: newToken() }, { DISCORD_TOKEN: wrong });
    const proc = runHerald(['serve'], env);
    expect((await proc.exited).code).toBe(2);
    const out = proc.output();
    expect(out).toContain('herald: Discord rejected DISCORD_TOKEN (401): check the bot token');
    expect(out).toMatch(/"status":401,"code":0,"msg":"Discord rejected DISCORD_TOKEN"/);
    expect(out).not.toContain('herald started');
    expect(out).not.toContain(wrong);
    expect(out).not.toMatch(STACK_LINE);
  });

  it('says the same when `herald commands register` is given a token Discord refuses', async () => {
    const proc = runHerald(['commands', 'register'], { DISCORD_TOKEN: `wrong.${newToken()}`, DISCORD_API_URL: sandbox.apiUrl });
    expect((await proc.exited).code).toBe(2);
    expect(proc.output()).toContain('herald: Discord rejected DISCORD_TOKEN (401): check the bot token');
  });

  it('warns once, outside sandbox mode, that MCP_BRIDGE_TOKEN and HERALD_ADMIN_TOKEN are unset', async () => {
    const env = heraldEnv({ sandbox, db, bridgeToken: '', adminToken: '' }, { HERALD_GATEWAY: 'off' });
    delete env['MCP_BRIDGE_TOKEN'];
    delete env['HERALD_ADMIN_TOKEN'];
    const proc = await startHeraldProcess(['serve'], env, 120_000);
    proc.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);
    const warnings = proc.output().split('\n').filter((l) => l.includes('not set:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('"level":40');
    expect(warnings[0]).toContain('not set: MCP_BRIDGE_TOKEN (every /mcp/ request will answer 503); HERALD_ADMIN_TOKEN (every /admin/ request will answer 503)');
  });

  it('logs what Discord said (status and code) when a mapping turns it into "channel not found"', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString().split('\n').filter((l) => l !== ''));
        done();
      },
    });
    const adminToken = newToken();
    const config = loadConfig(heraldEnv({ sandbox, db, bridgeToken: newToken(), adminToken }, { HERALD_GATEWAY: 'off', LOG_LEVEL: 'info' }));
    const herald = await startHerald({ config, log: createLogger('info', sink) });
    try {
      sandbox.inject({ method: 'GET', path: `^/channels/${IDS.channels.alerts}$`, action: 'error', status: 403, code: 50001 });
      const res = await client(herald.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
      expect(res.status).toBe(422);
      expect(res.text).toContain('channel not found or not visible to the bot');
      const logged = await waitFor(() => lines.find((l) => l.includes('channel lookup failed at Discord')), 'the lookup failure to be logged');
      expect(logged).toContain('discord 403 code 50001 on GET /api/v10/channels/');
    } finally {
      await herald.close();
    }
  });
});

describe('npm start', () => {
  let db: TestDatabase;
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    db = await testDatabase();
    sandbox = await new DiscordSandbox().start();
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.drop();
  });

  // A Ctrl-C in a terminal signals the whole process group: npm and Herald each get SIGINT, and
  // npm relays its own to Herald as well. Sent to npm's pid alone, it reaches Herald only by the relay.
  for (const [how, target] of [
    ['Ctrl-C (SIGINT to the whole process group)', 'group'],
    ['SIGINT to npm\'s pid alone', 'npm'],
  ] as const) {
    it(`finishes the graceful stop on ${how}`, async () => {
      const env = heraldEnv({ sandbox, db, bridgeToken: newToken(), adminToken: newToken() }, { HERALD_GATEWAY: 'off', LOG_LEVEL: 'info' });
      const npm = runCommand('npm', ['start'], env);
      await waitFor(() => npm.output().includes('"msg":"herald started"'), 'npm start to start Herald', 120_000);
      if (target === 'group') npm.kill('SIGINT');
      else process.kill(npm.child.pid ?? 0, 'SIGINT');
      expect(await npm.exited).toEqual({ code: 0, signal: null });
      await npm.closed;
      expect(npm.output()).toContain('"msg":"stopped"');
    });
  }

  for (const [how, target] of [
    ['Ctrl-C (SIGINT to the whole process group)', 'group'],
    ['SIGINT to npm\'s pid alone', 'npm'],
  ] as const) {
    it(`stops \`npm run mcp -- --http\` on ${how}`, async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-sigint-'));
      try {
        const token = newToken();
        const npm = runCommand('npm', ['run', 'mcp', '--', '--http'], { MCP_BRIDGE_TOKEN: token, HERALD_MCP_TOKEN: token, HERALD_MCP_PORT: '0', HERALD_DATA_DIR: dataDir });
        await waitFor(() => npm.output().includes('herald mcp: Streamable HTTP at'), 'the MCP server to listen', 60_000);
        if (target === 'group') npm.kill('SIGINT');
        else process.kill(npm.child.pid ?? 0, 'SIGINT');
        expect(await npm.exited).toEqual({ code: 0, signal: null });
        // Nothing left behind: every process of the group (npm, a shell, Herald) has exited.
        await npm.closed;
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    });
  }

  it('stops Herald when npm itself is sent SIGTERM (kill <pid of npm start>)', async () => {
    const env = heraldEnv({ sandbox, db, bridgeToken: newToken(), adminToken: newToken() }, { HERALD_GATEWAY: 'off', LOG_LEVEL: 'info' });
    const npm = runCommand('npm', ['start'], env);
    await waitFor(() => npm.output().includes('"msg":"herald started"'), 'npm start to start Herald', 120_000);
    // Only npm's own pid, as an operator would: the signal must reach Herald through it.
    process.kill(npm.child.pid ?? 0, 'SIGTERM');
    // 'closed': every process holding npm's output, Herald included, has exited.
    await npm.closed;
    expect(npm.output()).toContain('"msg":"stopped"');
  });
});
