#!/usr/bin/env node
// Runs the CLI compiled to dist/ (`npm ci` builds it through the prepare script; `npm run build`
// rebuilds it after a change), so no TypeScript is compiled at start-up.
import { access } from 'node:fs/promises';

const cli = new URL('../dist/src/cli.js', import.meta.url);
try {
  await access(cli);
} catch {
  console.error(`herald: the compiled CLI (${cli.pathname}) is missing: run \`npm run build\` (npm ci runs it) in the Herald checkout, then try again`);
  process.exit(2);
}
await import(cli.href);
