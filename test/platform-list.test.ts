import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { chatTools } from '../src/modules/chat/chat.tools.js';
import { PLATFORM_NAMES, PLATFORMS } from '../src/platforms/platforms.js';

// The contract names no platform: its `transport` fields take any platform name by their pattern,
// and Herald refuses a name it does not run. The registry is the one list; every name in it must be
// one the contract's patterns accept, and the chat tools offer each.
const spec = JSON.parse(readFileSync(new URL('../generated/openapi.json', import.meta.url), 'utf8')) as { components: { schemas: Record<string, { enum?: string[]; pattern?: string }> } };
const patternOf = (schema: string): RegExp => new RegExp(spec.components.schemas[schema]?.pattern ?? '(?!)', 'u');

describe('the platform registry', () => {
  it('names each platform once, each a name the contract takes, and the chat tools offer every one', () => {
    expect(new Set(PLATFORM_NAMES).size).toBe(PLATFORMS.length);
    for (const schema of ['ChatTransport', 'DestinationTransport']) {
      expect(spec.components.schemas[schema]?.enum).toBeUndefined();
      expect(PLATFORM_NAMES.filter((name) => !patternOf(schema).test(name))).toEqual([]);
    }
    const send = chatTools().find((t) => t.name === 'send_message');
    const schema = send?.inputSchema as { properties: Record<string, { enum?: string[] }> } | undefined;
    expect([...(schema?.properties['transport']?.enum ?? [])].sort()).toEqual([...PLATFORM_NAMES].sort());
  });
});
