import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/** Words of Herald's features and platforms: the floor everything stands on names none of them. */
const DOMAIN_WORDS = /deliver|discord|handoff|archive|\birc\b|chat|guild|nonce|snowflake/i;

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(entries.map((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : Promise.resolve([path.join(dir, e.name)]))));
  return nested.flat();
}

describe('src/infra', () => {
  it('names no feature and no platform, in code or comments: modules and transports declare what is theirs', async () => {
    const files = (await filesUnder('src/infra')).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(10);
    const found: string[] = [];
    for (const file of files) {
      for (const [i, line] of (await readFile(file, 'utf8')).split('\n').entries()) if (DOMAIN_WORDS.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    }
    expect(found).toEqual([]);
  });
});
