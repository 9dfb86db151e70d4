/**
 * patchedContext (machines/lib/contextCopy.ts) stands for `{ ...context, ...patch }` in the steps and for XState's
 * `assign` in stepAction: the same keys, in the same order, with the same values, whatever the context holds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AgentContext, agentContextSchema } from '../machines/context.js';
import { patchedContext } from '../machines/lib/contextCopy.js';
import { initialContext } from '../machines/steps/turn.js';
import { DEFAULT_LIMITS, DEFAULT_POLICY } from '../src/orchestrator/orchestrator.js';

const T0 = 1_700_000_000_000;
const context = (): AgentContext =>
  initialContext({
    taskId: 'task-1',
    goal: 'g',
    principal: { userId: 'E17', tenantId: 'acme', scopes: ['rooms:book'] },
    mandate: null,
    catalog: { find_rooms: { effect: 'read', sameKeyRetrySafe: false } },
    policy: DEFAULT_POLICY,
    provenance: { model: { id: 'test-model', version: null }, prompt: null },
    limits: DEFAULT_LIMITS,
    modelReservation: { tokens: 1_000, costMicros: 0 },
    success: null,
    startedAt: T0,
  });

/** Keys and values in order: what a snapshot's JSON shows. */
const entries = (value: object) => JSON.stringify(Object.entries(value));

describe('patchedContext', () => {
  it('copies as a spread does: the same keys in the same order, the patch over them, the source untouched', () => {
    const source = context();
    const before = entries(source);
    const patch: Partial<AgentContext> = { turn: 3, lastFailure: { tool: 't', code: 'c', summary: 's' }, batch: null };
    const copy = patchedContext(source, patch);
    expect(entries(copy)).toBe(entries({ ...source, ...patch }));
    expect(Object.keys(copy)).toEqual(Object.keys(agentContextSchema.shape));
    expect(copy).not.toBe(source);
    expect(entries(source)).toBe(before);
    expect(entries(patchedContext(source))).toBe(before);
  });

  it('a context read back (the schema parse) copies the same way', () => {
    const parsed = agentContextSchema.parse(JSON.parse(JSON.stringify(context())));
    const patch = { knowledge: 2, outcome: null };
    expect(entries(patchedContext(parsed, patch))).toBe(entries({ ...parsed, ...patch }));
  });

  it('falls back to a spread when the keys come in another order, or the patch or the context has others', () => {
    const source = context();
    const { taskId, ...rest } = source;
    const reordered = { ...rest, taskId } as AgentContext;
    expect(entries(patchedContext(reordered, { turn: 9 }))).toBe(entries({ ...reordered, turn: 9 }));
    const extra = { ...source, extra: 1 } as AgentContext;
    expect(entries(patchedContext(extra, { turn: 9 }))).toBe(entries({ ...extra, turn: 9 }));
    const unknown = { turn: 2, other: 'x' } as Partial<AgentContext>;
    expect(entries(patchedContext(source, unknown))).toBe(entries({ ...source, ...unknown }));
    // An own `__proto__` key in a patch stays a plain key, as in a spread (never the copy's prototype).
    const proto = JSON.parse('{"__proto__": {"polluted": true}}') as Partial<AgentContext>;
    const copy = patchedContext(source, proto);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(entries(copy)).toBe(entries({ ...source, ...proto }));
  });
  it('equals a spread for any context (keys missing, extra, reordered) and any patch (own __proto__ included)', () => {
    const schemaKeys = Object.keys(agentContextSchema.shape);
    const names = fc.constantFrom(...schemaKeys, '__proto__', 'extra', 'constructor', 'toString');
    const own = (pairs: [string, unknown][]) => {
      const o: Record<string, unknown> = {};
      for (const [k, v] of pairs)
        Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
      return o;
    };
    const full = context() as unknown as Record<string, unknown>;
    const contextArb = fc.oneof(
      fc.constant(schemaKeys.map((k) => [k, full[k]] as [string, unknown])),
      fc.shuffledSubarray(schemaKeys).map((ks) => ks.map((k) => [k, full[k]] as [string, unknown])),
      fc
        .tuple(fc.constant(schemaKeys), fc.array(names, { maxLength: 3 }))
        .map(([ks, more]) => [...ks, ...more].map((k) => [k, full[k] ?? k] as [string, unknown])),
    );
    const patchArb = fc.option(fc.array(fc.tuple(names, fc.jsonValue()), { maxLength: 6 }), { nil: undefined });
    fc.assert(
      fc.property(contextArb, patchArb, (cPairs, pPairs) => {
        const source = own(cPairs) as unknown as AgentContext;
        const patch = pPairs && (own(pPairs) as Partial<AgentContext>);
        const before = entries(source);
        const copy = patchedContext(source, patch);
        const spread = { ...source, ...patch };
        expect(entries(copy)).toBe(entries(spread));
        expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
        expect(copy).not.toBe(source);
        expect(entries(source)).toBe(before);
      }),
      { numRuns: 2_000 },
    );
  });
});
