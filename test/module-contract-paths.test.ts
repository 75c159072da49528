import { describe, expect, it } from 'vitest';
import { contractWith } from '../src/infra/contract/spec.js';

// A module's own contract is merged into the bundle (contractWith): a path the bundle routes
// already must stop start-up, also when only its parameters' names differ, as the router matches
// both the same and the bundle's operation would answer every call meant for the module's.

const doc = (paths: Record<string, unknown>): Record<string, unknown> => ({ openapi: '3.1.0', info: { title: 'probe', version: '1' }, paths });
const op = (operationId: string): unknown => ({ get: { operationId, responses: { '200': { description: 'ok' } } } });

describe("a module contract's paths", () => {
  it('a path the bundle has under other parameter names is refused, naming both', () => {
    expect(() => contractWith([{ owner: 'probe', document: doc({ '/mcp/deliveries/{other}': op('shadowDelivery') }) }])).toThrow(
      "module probe's contract declares the path /mcp/deliveries/{other}, which the bundled contract (openapi/) (as /mcp/deliveries/{request_id}) declares too: rename it in its contract file",
    );
  });

  it('two modules declaring one route under different names: the second is refused', () => {
    expect(() =>
      contractWith([
        { owner: 'one', document: doc({ '/mcp/probe/{a}': op('probeA') }) },
        { owner: 'two', document: doc({ '/mcp/probe/{b}': op('probeB') }) },
      ]),
    ).toThrow("module two's contract declares the path /mcp/probe/{b}, which module one (as /mcp/probe/{a}) declares too: rename it in its contract file");
  });

  it('a literal path beside a template, and the same path exactly, keep their answers', () => {
    expect(() => contractWith([{ owner: 'probe', document: doc({ '/mcp/probe/{a}': op('probeA'), '/mcp/probe/{a}/more': op('probeMore'), '/mcp/probe/fixed': op('probeFixed') }) }])).not.toThrow();
    expect(() => contractWith([{ owner: 'probe', document: doc({ '/mcp/files': op('clash') }) }])).toThrow(
      "module probe's contract declares the path /mcp/files, which the bundled contract (openapi/) declares too: rename it in its contract file",
    );
  });
});
