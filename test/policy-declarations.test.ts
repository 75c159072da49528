import { describe, expect, it } from 'vitest';
import { mcpTools } from '../src/mcp/tools.js';
import { contractOf } from '../src/modules/http-api.js';
import { MODULES } from '../src/modules/modules.js';
import { declarationOf, toolsNamed, type PolicyDeclaration } from '../src/infra/policy/declaration.js';

interface Op {
  operationId?: string;
  security?: Record<string, unknown>[];
  responses?: Record<string, { $ref?: string; content?: Record<string, { schema?: unknown }> }>;
  'x-herald-policy'?: unknown;
}

const bundle = contractOf(MODULES).document as { security: Record<string, unknown>[]; paths: Record<string, Record<string, Op>> };
/** Every operation of the contract Herald serves (generated/openapi.json and the modules' own contract files), with its method. */
const operations = Object.values(bundle.paths).flatMap((item) => Object.entries(item).flatMap(([method, op]) => (typeof op === 'object' && op !== null && typeof op.operationId === 'string' ? [{ id: op.operationId, method, op }] : [])));
const tools = mcpTools();
const toolNames = new Set(tools.map((t) => t.name));
const declared = new Map(operations.map(({ id, op }) => [id, declarationOf(op, toolNames)]));
const declaration = (id: string): PolicyDeclaration => declared.get(id)?.declaration as PolicyDeclaration;

/** Whether a bridge-token caller (the policy's subject) can reach the operation at all. */
const bridgeReaches = (op: Op): boolean => (op.security ?? bundle.security).some((s) => 'bridgeToken' in s);

/** The `$ref`s and schemas under a response, as text: enough to see which shared answer it is. */
const answers = (op: Op, status: string): string => JSON.stringify(op.responses?.[status] ?? null);

describe("every operation declares its policy intent (x-herald-policy), and the engine reads only that", () => {
  it('finds operations and tools to walk', () => {
    expect(operations.length).toBeGreaterThan(40);
    expect(tools.length).toBeGreaterThan(30);
  });

  it('takes speaks_as: caller and nothing else for it', () => {
    expect(declarationOf({ 'x-herald-policy': { access: 'read', speaks_as: 'caller' } }).problems).toEqual([]);
    expect(declarationOf({ 'x-herald-policy': { access: 'read', speaks_as: 'anyone' } }).problems).toEqual(['speaks_as must be caller']);
  });

  it.each(operations.map((o) => [o.id, o] as const))('%s declares a well-formed intent naming only tools that exist', (_id, { op }) => {
    const { problems } = declarationOf(op, toolNames);
    expect(problems).toEqual([]);
  });

  it.each(operations.map((o) => [o.id, o] as const))('%s: a GET only reads', (id, { method }) => {
    const d = declaration(id);
    if (method === 'get' || method === 'head') expect(d.access).toBe('read');
  });

  it.each(operations.filter((o) => bridgeReaches(o.op)).map((o) => [o.id, o] as const))('%s, reachable with the bridge token, answers the policy refusal (403) and, serving a tool, the confirm (428)', (id, { op }) => {
    expect(answers(op, '403')).toContain('PolicyRefus');
    if (declaration(id).tool !== undefined) expect(answers(op, '428')).toContain('PolicyConfirm');
    // A rate cap used up is 429 with Retry-After (the same body shape): counted on the calls of a tool that writes.
    if (declaration(id).tool !== undefined && declaration(id).access !== 'read') expect(answers(op, '429')).toMatch(/TooManyRequests|PolicyRateRefusal/);
  });

  it.each(tools.map((t) => [t.name, t] as const))('tool %s declares the operations it calls, and each names it back', (name, tool) => {
    expect(tool.operations.length).toBeGreaterThan(0);
    for (const id of tool.operations) {
      expect(declared.has(id), `${name} calls ${id}, which is no operation of the contract`).toBe(true);
      expect(toolsNamed(declaration(id)), `${id} does not name ${name}, which calls it`).toContain(name);
      // A tool that says it changes nothing calls nothing that does (a read-only rule lists it and must let it run).
      if (tool.annotations.readOnlyHint) expect(declaration(id).access, `${name} is read-only but ${id} is not`).toBe('read');
    }
  });

  it.each(tools.map((t) => [t.name, t] as const))('tool %s is some operation\'s own tool, and a tool that writes calls one that does', (name, tool) => {
    const own = operations.filter(({ id }) => {
      const t = declaration(id).tool;
      return t === name || (typeof t === 'object' && Object.values(t.values).includes(name));
    });
    expect(own.length, `no operation declares tool: ${name}`).toBeGreaterThan(0);
    if (!tool.annotations.readOnlyHint) expect(tool.operations.some((id) => declaration(id).access !== 'read')).toBe(true);
  });
});
