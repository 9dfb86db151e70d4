/**
 * canonicalJson's fast path (JSON.stringify when the value is already canonical) must write byte for byte what the
 * sorting writer wrote before it (test/support/canonicalJsonBefore.ts, the implementation as of 6ef52df^1), and throw
 * where it threw: the text feeds hashes (confirmation binding, idempotency keys).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../machines/lib/canonicalJson.js';
import { canonicalJson as before } from './support/canonicalJsonBefore.js';

type Outcome = { text: string } | { threw: string };
const run = (f: (v: unknown) => string, value: unknown): Outcome => {
  try {
    return { text: f(value) };
  } catch (error) {
    return { threw: (error as Error).constructor.name + ': ' + (error as Error).message };
  }
};

// Keys JS orders in unusual ways: integer-like ones come first in ascending numeric order, whatever their insertion.
const KEYS = [
  '0',
  '1',
  '2',
  '9',
  '10',
  '01',
  '-1',
  '1.5',
  '4294967294',
  '4294967295',
  '__proto__',
  'toJSON',
  '',
  'a',
  'b',
  'B',
  'aa',
  'é',
  'z',
  '\ud800',
  '\u{1F600}',
  'constructor',
];
const odd = fc.constantFrom<unknown>(
  -0,
  NaN,
  Infinity,
  1e21,
  5e-324,
  undefined,
  new Date(0),
  new Map(),
  Symbol('s'),
  10n,
  () => 1,
  { toJSON: () => 'x' },
  new String('s'),
  new Uint8Array(1),
  Object.create({ inherited: 1 }),
);
const leaf = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.oneof(fc.constant(null), fc.boolean(), fc.string({ unit: 'binary' }), fc.double(), fc.integer()),
  },
  { weight: 1, arbitrary: odd },
);

const { value } = fc.letrec<{ value: unknown; object: unknown; array: unknown }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('object'), tie('array')),
  // Own data properties defined one by one (so `__proto__` is an own key, never the prototype), null or plain proto.
  object: fc
    .tuple(fc.array(fc.tuple(fc.constantFrom(...KEYS), tie('value')), { maxLength: 6 }), fc.boolean())
    .map(([pairs, nullProto]) => {
      const o = nullProto ? Object.create(null) : {};
      for (const [k, v] of pairs)
        Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
      return o as unknown;
    }),
  array: fc
    .tuple(fc.array(tie('value'), { maxLength: 5 }), fc.array(fc.nat(6), { maxLength: 2 }))
    .map(([items, holes]) => {
      const a = [...items];
      for (const h of holes) if (h < a.length) delete a[h];
      return a as unknown;
    }),
}));

describe('canonicalJson fast path', () => {
  it('writes what the writer before it wrote, and throws where it threw, for any value', () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(run(canonicalJson, v)).toEqual(run(before, v));
      }),
      { numRuns: 20_000 },
    );
  });

  it('agrees on the hand-picked edge cases', () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.b = cycle;
    const shared = { x: 1 };
    const cases: unknown[] = [
      { 10: 1, 9: 2 },
      { 1: 1, a: 2 },
      { a: 1, 1: 2 },
      JSON.parse('{"__proto__": {"b": 1, "a": 2}}'),
      JSON.parse('{"a": 1, "__proto__": 2}'),
      { a: -0, b: [-0] },
      // eslint-disable-next-line no-sparse-arrays -- a hole on purpose
      [1, , 3],
      [undefined],
      { a: undefined },
      { toJSON: 'plain' },
      { [Symbol('k')]: 1, a: 1 },
      { a: new Date(0) },
      cycle,
      { p: shared, q: shared },
      Object.assign(Object.create(null), { b: 1, a: 2 }),
      '\ud800',
      { '\u{1F600}': 1, '\uffff': 2 },
    ];
    for (const c of cases) expect(run(canonicalJson, c)).toEqual(run(before, c));
  });
});
