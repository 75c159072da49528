import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { chatTools } from '../src/modules/chat/chat.tools.js';
import { TRANSPORT_NAMES, TRANSPORTS } from '../src/transports/registry.js';

// The contract names the platforms where it must (the chat tools' `transport`); the registry is the
// one list they come from, so a platform added to the registry but not to the contract fails here.
const spec = JSON.parse(readFileSync(new URL('../generated/openapi.json', import.meta.url), 'utf8')) as { components: { schemas: Record<string, { enum?: string[] }> } };

describe('the platform registry', () => {
  it('names each platform once, and every platform it names is in the contract and the chat tools', () => {
    expect(new Set(TRANSPORT_NAMES).size).toBe(TRANSPORTS.length);
    expect([...(spec.components.schemas['ChatTransport']?.enum ?? [])].sort()).toEqual([...TRANSPORT_NAMES].sort());
    const send = chatTools().find((t) => t.name === 'send_message');
    const schema = send?.inputSchema as { properties: Record<string, { enum?: string[] }> } | undefined;
    expect([...(schema?.properties['transport']?.enum ?? [])].sort()).toEqual([...TRANSPORT_NAMES].sort());
  });
});
