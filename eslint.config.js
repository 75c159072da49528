import path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const ROOT = path.dirname(fileURLToPath(import.meta.url));

/**
 * The floors of docs/architecture.md, as a rule: where an import of src/ may point.
 * - a module (src/modules/<name>/) reaches another module only through its index.ts;
 * - a platform folder (src/platforms/) imports no module;
 * - infrastructure (src/infra/) imports no module, no outbox and no platform folder.
 */
const floors = {
  meta: { type: 'problem', schema: [], messages: { wrong: '{{why}} ({{target}})' } },
  create(context) {
    const file = path.relative(ROOT, context.filename).split(path.sep).join('/');
    if (!file.startsWith('src/')) return {};
    const inside = (p, dir) => p.startsWith(`${dir}/`);
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      let why;
      if (inside(file, 'src/infra') && ['src/modules', 'src/outbox', 'src/platforms'].some((d) => inside(target, d))) why = 'infrastructure imports no module, outbox or platform';
      else if (inside(file, 'src/platforms') && inside(target, 'src/modules')) why = 'a platform imports no module';
      else {
        const own = /^src\/modules\/([^/]+)\//.exec(file)?.[1];
        const other = /^src\/modules\/([^/]+)\/(.+)$/.exec(target);
        if (own !== undefined && other !== null && other[1] !== own && other[2] !== 'index.js') why = `another module is imported only through its index.ts (../${other[1]}/index.js)`;
      }
      if (why !== undefined) context.report({ node: node.source, messageId: 'wrong', data: { why, target } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', 'generated/', 'data/', 'coverage/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', performance: 'readonly', queueMicrotask: 'readonly', URL: 'readonly', URLSearchParams: 'readonly', AbortController: 'readonly', structuredClone: 'readonly', fetch: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { herald: { rules: { floors } } },
    rules: { 'herald/floors': 'error' },
  },
  {
    files: ['migrations/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['src/cli.ts', 'bin/**', 'test/**', 'bench/**'],
    rules: { 'no-console': 'off' },
  },
);
