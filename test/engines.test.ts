import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('dependencies and the engines field', () => {
  it('every locked package supports the Node this runs on (npm ci prints no EBADENGINE)', () => {
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };
    const unsupported = Object.entries(lock.packages)
      .filter(([name, p]) => name !== '' && !Array.isArray(p.engines) && p.engines?.node !== undefined && !semver.satisfies(process.versions.node, p.engines.node))
      .map(([name, p]) => `${name.replace(/^.*node_modules\//, '')}@${p.version ?? '?'} needs node ${Array.isArray(p.engines) ? '' : (p.engines?.node ?? '')}`);
    expect(unsupported).toEqual([]);
  });
});
