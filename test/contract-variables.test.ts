import { describe, expect, it } from 'vitest';
import { knownVariables } from '../src/config-variables.js';
import { loadSpec } from '../src/infra/contract/spec.js';

/**
 * The contract names only variables Herald reads: it told operators to set
 * `DISCORD_MESSAGE_CONTENT=1`, where Herald reads `HERALD_DISCORD_MESSAGE_CONTENT=on`.
 */
describe('the variables the contract names', () => {
  it('are each one Herald knows, with a value it takes', () => {
    const text = loadSpec().text;
    const named = [...new Set(text.match(/\b(?:(?:HERALD|DISCORD|MCP)_[A-Z0-9_]*[A-Z0-9])\b/g) ?? [])];
    expect(named).toContain('HERALD_DISCORD_MESSAGE_CONTENT');
    const known = knownVariables();
    expect(named.filter((name) => !known.includes(name))).toEqual([]);
    // An on/off variable is set with on or off (src/infra/env.ts), never 1.
    expect(text.match(/HERALD_DISCORD_MESSAGE_CONTENT=(\w+)/g)?.every((m) => m.endsWith('=on') || m.endsWith('=off'))).toBe(true);
  });
});
