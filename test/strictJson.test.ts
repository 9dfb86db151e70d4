import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../machines/lib/canonicalJson.js';
import { hashArguments } from '../src/hashing.js';
import { parseStrictJson, utf8Length } from '../machines/lib/strictJson.js';

describe('parseStrictJson', () => {
  it.each([
    ['{}', {}],
    ['{"a":1,"b":[true,false,null],"c":{"d":"e"}}', { a: 1, b: [true, false, null], c: { d: 'e' } }],
    ['  [1, -2.5e3, 0.1] ', [1, -2500, 0.1]],
    ['"\\u0041\\n\\"x\\""', 'A\n"x"'],
  ])('parses %s like JSON.parse', (text, expected) => {
    expect(parseStrictJson(text)).toEqual({ ok: true, value: expected });
    expect(parseStrictJson(text)).toEqual({ ok: true, value: JSON.parse(text) });
  });

  it('refuses a duplicate key and names it with its offset', () => {
    const result = parseStrictJson('{"amount": 199, "amount": 999}');
    expect(result).toMatchObject({ ok: false, code: 'duplicate_key', offset: 16 });
    expect(result.ok ? '' : result.message).toContain('"amount"');
  });

  it('refuses duplicate keys in nested objects too', () => {
    expect(parseStrictJson('{"a":{"b":1,"b":2}}')).toMatchObject({ ok: false, code: 'duplicate_key' });
  });

  it.each(['', '{', '{"a":}', '{"a":1,}', '[1,]', 'tru', '{"a":1} x', "{'a':1}", '01', '{"a":"\u0001"}', 'NaN'])(
    'refuses malformed %j',
    (text) => {
      expect(parseStrictJson(text)).toMatchObject({ ok: false, code: 'malformed_json' });
    },
  );

  it('refuses nesting deeper than 64 levels', () => {
    expect(parseStrictJson('['.repeat(70) + ']'.repeat(70))).toMatchObject({ ok: false, code: 'too_deep' });
  });

  it('keeps __proto__ as an own data property, as JSON.parse does', () => {
    const result = parseStrictJson('{"__proto__":{"polluted":true}}');
    expect(result.ok).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    if (result.ok) expect(Object.keys(result.value as object)).toEqual(['__proto__']);
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('gives equal hashes for the same arguments in any key order', () => {
    expect(hashArguments({ amount: 199, order_id: 'O-1' })).toBe(hashArguments({ order_id: 'O-1', amount: 199 }));
    expect(hashArguments({ amount: 199, order_id: 'O-1' })).not.toBe(hashArguments({ amount: 999, order_id: 'O-1' }));
  });

  it.each([[undefined], [() => 1], [Number.NaN], [Infinity], [new Date(0)], [{ a: undefined }]])(
    'refuses %s instead of silently dropping it',
    (value) => {
      expect(() => canonicalJson(value)).toThrow(TypeError);
    },
  );

  it('writes what it always wrote, whether the value is canonical as it stands or not', () => {
    // The text `write` alone gave before the fast path (JSON.stringify of the value already canonical).
    const cases: [unknown, string][] = [
      [{ a: 1, b: [true, null, 'x', -0, 1e21, 0.1] }, '{"a":1,"b":[true,null,"x",0,1e+21,0.1]}'],
      [{ '10': 1, '9': 2 }, '{"10":1,"9":2}'],
      [{ é: 'a\u2028\ud800', e: '"' }, '{"e":"\\"","é":"a\u2028\\ud800"}'],
      [Object.assign(Object.create(null) as object, { b: 1, a: 2 }), '{"a":2,"b":1}'],
      [[[], {}, [{}]], '[[],{},[{}]]'],
      [{ toJSON: 'kept as a key' }, '{"toJSON":"kept as a key"}'],
    ];
    for (const [value, text] of cases) expect(canonicalJson(value)).toBe(text);
    // A shared (not cyclic) object is written twice, as before; a hole as nothing, as `join` writes it.
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"x":1},"b":[{"x":1}]}');
    const holed = [1, 2, 3];
    delete holed[1];
    expect(canonicalJson(holed)).toBe('[1,,3]');
    // A toJSON is never called: an instance is refused, an array's own one ignored.
    class Money {
      constructor(readonly amount: number) {}
      toJSON() {
        return 'hidden';
      }
    }
    expect(() => canonicalJson({ a: new Money(1) })).toThrow(TypeError);
    const withToJson = [1] as unknown as { toJSON: () => string };
    withToJson.toJSON = () => 'x';
    expect(canonicalJson(withToJson)).toBe('[1]');
  });

  it('refuses cycles', () => {
    const a: Record<string, unknown> = {};
    a.self = a;
    expect(() => canonicalJson(a)).toThrow(/cycle/);
  });
});

describe('utf8Length', () => {
  it.each(['', 'abc', 'é', '会议室', '😀', 'a\ud800b'])('matches Buffer.byteLength for %j', (text) => {
    expect(utf8Length(text)).toBe(Buffer.byteLength(text, 'utf8'));
  });
});
