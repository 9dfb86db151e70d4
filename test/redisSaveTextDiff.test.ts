/**
 * What a Redis save sends must stay byte for byte what it was: the envelope's JSON and its summary's place
 * (`redisEnvelopeText.ts`, now written member by member) and the audit message (`redisAuditPacking.ts`) are compared
 * with the code before the change (`support/*Before.ts`) on the saves of real tasks and on adversarial values.
 */
import { describe, expect, it } from 'vitest';
import { packAudit } from '../src/store/redis/redisAuditPacking.js';
import { encodedEnvelope, envelopeText } from '../src/store/redis/redisEnvelopeText.js';
import type { SaveRequest, TaskStore } from '../src/store/taskStore.js';
import { LOCAL_API } from '../scripts/bench/projectApi.js';
import { BENCH_PRINCIPAL, goalFor, projectOptions } from '../scripts/bench/workload.js';
import { packAudit as packAuditBefore } from './support/redisAuditPackingBefore.js';
import { envelopeText as envelopeTextBefore } from './support/redisEnvelopeTextBefore.js';
import { createRequest, nextRequest } from './support/envelopes.js';

/** The outcome of `f`: its value, or the class and message of what it threw. */
function outcome<T>(f: () => T): { value: T } | { error: string } {
  try {
    return { value: f() };
  } catch (error) {
    return { error: `${(error as Error).constructor.name}: ${(error as Error).message}` };
  }
}

function sameEnvelopeText(envelope: unknown): void {
  const before = outcome(() => envelopeTextBefore(envelope as never));
  expect(outcome(() => envelopeText(envelope as never))).toEqual(before);
  // As a save sends it whole: the same text, encoded.
  const encoded = outcome(() => encodedEnvelope(envelope as never, true));
  if ('error' in before) expect(encoded).toEqual(before);
  else if ('error' in encoded) expect.fail(`${encoded.error} where the text was ${before.value.text}`);
  else {
    expect(encoded.value.text).toEqual(before.value);
    expect(encoded.value.encoded!.equals(Buffer.from(before.value.text, 'utf8'))).toBe(true);
  }
}

/** The save requests of `tasks` bench tasks of `k` read rounds each, on a MemoryStore, as the orchestrator made them. */
async function realSaves(k: number, tasks: number): Promise<SaveRequest[]> {
  const memory = new LOCAL_API.MemoryStore();
  const saves: SaveRequest[] = [];
  const store = new Proxy(memory, {
    get(target, key) {
      if (key === 'save')
        return (request: SaveRequest) => {
          saves.push(request);
          return target.save(request);
        };
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as TaskStore;
  const orchestrator = LOCAL_API.createOrchestrator(projectOptions(store, undefined, LOCAL_API));
  try {
    await Promise.all(
      Array.from({ length: tasks }, (_, i) =>
        orchestrator.run({ principal: BENCH_PRINCIPAL, goal: goalFor(k), taskId: `diff-${i}` }),
      ),
    );
  } finally {
    await orchestrator.close();
  }
  return saves;
}

const awkward = [
  'plain',
  'quote " backslash \\ slash / newline \n tab \t nul \u0000 bell \u0007',
  'é ü 日本語 😀',
  '\ud800 lone high',
  'lone low \udc00',
  '\u2028\u2029',
  '"summary":{"x":1}',
  '}],{[',
];

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

/** Envelopes made to trip a member-by-member writer up. */
function adversarial(): unknown[] {
  const base = createRequest('adv').envelope as unknown as Record<string, unknown>;
  const withMember = (key: string, value: unknown, at = 3) => {
    const keys = Object.keys(base);
    const out: Record<string, unknown> = {};
    keys.forEach((k, i) => {
      if (i === at) Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      out[k] = base[k];
    });
    return out;
  };
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const withGetter = { ...base };
  Object.defineProperty(withGetter, 'computed', { get: () => ({ n: 1 }), enumerable: true });
  Object.defineProperty(withGetter, 'hidden', { value: 'not written', enumerable: false });
  const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, base);
  const sparse: unknown[] = [1];
  sparse[3] = 2;
  const list: unknown[] = [
    base,
    nullProto,
    withGetter,
    { ...base, toJSON: () => ({ summary: { replaced: true } }) },
    new Proxy(base, {}),
    [base],
    { taskId: 'no-summary' },
    { taskId: 'x', summary: 'not an object' },
    { taskId: 'x', summary: null },
    { taskId: 'x', summary: [] },
    { taskId: 'x', summary: { toJSON: () => ({ moved: 1 }) } },
    { taskId: 'x', summary: { toJSON: (key: string) => ({ key }) } },
    { taskId: 'x', summary: { toJSON: () => 'text' } },
    { taskId: 'x', summary: new Date(0) },
    { taskId: 'x', summary: new Point(1, 2) },
    { taskId: 'x', summary: new Map([[1, 2]]) },
    { taskId: 'x', summary: new Proxy({ a: 1 }, {}) },
    { taskId: 'x', summary: {}, big: 1n },
    { taskId: 'x', summary: {}, cyclic },
    { taskId: 'x', summary: { cyclic } },
  ];
  for (const text of awkward) {
    list.push(withMember(text, text), withMember('k', { [text]: [text, { text }] }, 7));
    list.push({ ...base, summary: { ...(base.summary as object), note: text } });
  }
  const values: unknown[] = [
    -0,
    0,
    NaN,
    Infinity,
    -Infinity,
    1e21,
    5e-324,
    undefined,
    null,
    () => 1,
    Symbol('s'),
    true,
    Object('boxed'),
    Object(7),
    Object(false),
    new Date(1_700_000_000_000),
    new Date(NaN),
    new Point(-0, NaN),
    new Map([['a', 1]]),
    new Set([1]),
    /re/g,
    sparse,
    [undefined, () => 1, Symbol('x')],
    { toJSON: () => undefined },
    { toJSON: (key: string) => `key:${key}` },
    { toJSON: () => ({ toJSON: () => 'twice' }) },
    { nested: { toJSON: (key: string) => `nested:${key}` } },
    Object.assign(() => 1, { toJSON: (key: string) => `function:${key}` }),
    JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":1}}'),
    new Uint8Array([1, 2]),
  ];
  values.forEach((value, i) => {
    list.push(withMember(`m${i}`, value, i % 9), withMember('summary', value, 0));
    list.push({ ...base, snapshot: { ...(base.snapshot as object), extra: value } });
  });
  list.push(withMember('__proto__', { own: true }), withMember('toJSON', 'not a function'));
  return list;
}

describe('Redis save texts against the code before', () => {
  it('writes the same envelope text and summary span, and the same audit message, for real saves', async () => {
    const saves = await realSaves(30, 3);
    expect(saves.length).toBeGreaterThan(90);
    for (const request of saves) {
      sameEnvelopeText(request.envelope);
      expect(packAudit(request.append.audit)).toBe(packAuditBefore(request.append.audit));
    }
    // Further saves of hand-made tasks, many states.
    let request = createRequest('hand', { state: 'running' });
    for (let i = 0; i < 20; i++) {
      sameEnvelopeText(request.envelope);
      request = nextRequest(request.envelope, { state: i % 3 === 0 ? 'waiting_for_user' : 'running' });
    }
  }, 60_000);

  it('writes the same text, or throws the same error, for adversarial envelopes', () => {
    for (const envelope of adversarial()) sameEnvelopeText(envelope);
  });

  it('writes what an envelope holds now, after a member was changed in place', () => {
    const envelope = createRequest('mutated').envelope as unknown as Record<string, unknown>;
    const context = (envelope.snapshot as { context: Record<string, unknown> }).context;
    const first = envelopeText(envelope as never).text;
    (context.policy as Record<string, unknown>).version = 'policy/changed-in-place';
    (envelope.summary as Record<string, unknown>).state = 'waiting';
    const second = envelopeText(envelope as never);
    expect(second.text).not.toBe(first);
    expect(second.text).toBe(JSON.stringify(envelope));
    expect(second).toEqual(envelopeTextBefore(envelope as never));
  });

  it('packs the same audit message for adversarial entries', () => {
    const stamp = { model: { id: 'm', version: null }, prompt: null, policy: 'p', session: null };
    const entry = (at: unknown, extra: Record<string, unknown>) => ({ at, turn: 1, ...stamp, ...extra });
    for (const text of awkward) {
      const lists: unknown[][] = [
        [entry(1, { kind: text }), entry(2, { kind: 'b', [text]: text })],
        [entry(-0, { kind: 'a', callId: text, tool: text }), entry(NaN, { kind: 'b', callId: text, tool: text })],
        [entry(1, { kind: 'a', v: undefined, f: () => 1 }), entry(2, { kind: 'a', d: new Date(0) })],
        [entry(1, { moves: text }), entry(2, { moves: '1a/2b' }), { toJSON: () => entry(3, {}) }],
        [JSON.parse('{"__proto__":1,"at":1}'), entry(2, { toJSON: 'x' }), null, 7, [1]],
        // The stamp out of its place, or with a value JSON leaves out.
        [entry(1, { kind: text }), { turn: 1, at: 2, ...stamp }, { at: 3, kind: text, ...stamp, turn: 2 }],
        [entry(1, {}), { ...entry(2, {}), session: undefined }, { ...stamp, at: 3, turn: 3 }, { at: 4, ...stamp }],
        [entry(1, {}), { at: 2, turn: 2, model: stamp.model, policy: 'p', prompt: null, session: null }],
      ];
      for (const list of lists) expect(packAudit(list)).toBe(packAuditBefore(list));
    }
    // Entries of one call, one without a prototype and without `tool`; then with `tool` on Object's prototype too.
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, entry(2, { kind: 'b', callId: 'c' }));
    const calls = [
      entry(1, { kind: 'a', callId: 'c', tool: 't', argsHash: 'h' }),
      bare,
      entry(3, { kind: 'c', callId: 'c', tool: 't', toolVersion: 'v' }),
      entry(4, { kind: 'd', callId: 'c', tool: 'other' }),
      entry(5, { kind: 'e', callId: 'd', tool: null }),
      entry(6, { kind: 'e', callId: 'd', tool: 'x' }),
      entry(7, { kind: 'f', callId: 'e', argsHash: 7 }),
      entry(8, { kind: 'f', callId: 'e' }),
    ];
    expect(packAudit(calls)).toBe(packAuditBefore(calls));
    for (const polluted of ['t', 'u']) {
      Object.defineProperty(Object.prototype, 'tool', { value: polluted, configurable: true, writable: true });
      try {
        expect(packAudit(calls)).toBe(packAuditBefore(calls));
      } finally {
        delete (Object.prototype as Record<string, unknown>).tool;
      }
    }
  });
});
