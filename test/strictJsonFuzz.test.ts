/**
 * The strict JSON parser reads untrusted model output: its allocation rewrite (ae75c1d: no key set, no descriptor per
 * member, numbers scanned by hand) must accept, reject and report exactly as the parser before it did
 * (test/support/strictJsonBefore.ts, as of 2fb63f2), and agree with JSON.parse wherever it accepts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseStrictJson } from '../machines/lib/strictJson.js';
import { parseStrictJson as before } from './support/strictJsonBefore.js';

/** A result with its value shown so that -0, own `__proto__` and key order all count. */
function shown(text: string, parse: typeof parseStrictJson) {
  const result = parse(text);
  if (!result.ok) return result;
  return { ok: true, value: describe_(result.value) };
}

function describe_(value: unknown): unknown {
  if (Object.is(value, -0)) return '-0';
  if (Array.isArray(value)) return value.map(describe_);
  if (value && typeof value === 'object') {
    const proto = Object.getPrototypeOf(value) === Object.prototype ? 'Object' : 'other';
    const own = Reflect.ownKeys(value).map((key) => {
      const d = Object.getOwnPropertyDescriptor(value, key)!;
      return [String(key), d.enumerable, d.writable, d.configurable, 'get' in d, describe_(d.value)];
    });
    return { proto, own };
  }
  return value;
}

const PIECES = [
  '-',
  '0',
  '1',
  '9',
  '.',
  'e',
  'E',
  '+',
  '00',
  '01',
  '1.',
  '.5',
  '1e',
  '1e+',
  '1E+2',
  '-0',
  '1e400',
  '-1e400',
  '1e-400',
  '123456789012345678901234567890',
  '"',
  '\\',
  '\\u',
  '\\ud800',
  '\\udc00',
  'ab',
  '{',
  '}',
  '[',
  ']',
  ':',
  ',',
  ' ',
  '\n',
  'true',
  'fals',
  'null',
  '"__proto__"',
  '"constructor"',
  '"hasOwnProperty"',
  '"toString"',
  '"a"',
  '"valueOf"',
  '"__defineGetter__"',
  '"0"',
  '"1"',
  '"01"',
];

describe('parseStrictJson against the parser before the allocation rewrite', () => {
  it('agrees on random token soups (numbers, escapes, dangerous keys)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...PIECES), { maxLength: 30 }), (parts) => {
        const text = parts.join('');
        expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
      }),
      { numRuns: 20_000 },
    );
  });

  it('agrees on objects with dangerous and repeated keys', () => {
    const key = fc.constantFrom('__proto__', 'constructor', 'hasOwnProperty', 'toString', 'valueOf', 'a', '0', '1');
    const value = fc.constantFrom('1', '-0', '{}', '{"__proto__":1}', '[]', 'null', '"x"', '{"hasOwnProperty":2}');
    fc.assert(
      fc.property(fc.array(fc.tuple(key, value), { maxLength: 6 }), (members) => {
        const text = `{${members.map(([k, v]) => `"${k}":${v}`).join(',')}}`;
        expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
        const result = parseStrictJson(text);
        const keys = members.map(([k]) => k);
        expect(result.ok).toBe(new Set(keys).size === keys.length);
        if (result.ok) expect(describe_(result.value)).toEqual(describe_(JSON.parse(text)));
      }),
      { numRuns: 5_000 },
    );
  });

  it('agrees on numbers at and around the 400-character window', () => {
    for (const length of [1, 2, 397, 398, 399, 400, 401, 402]) {
      for (const tail of ['', '.5', 'e5', 'e+', '.', 'e-1', '0']) {
        for (const head of ['', '-', '0', '-0']) {
          const digits = head.replace('0', '') + '1'.repeat(Math.max(0, length - head.length));
          for (const text of [digits + tail, `[${digits + tail}]`, head + tail, `{"a":${digits}${tail}}`]) {
            expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
          }
        }
      }
    }
  });

  it('agrees with JSON.parse on whatever it accepts', () => {
    fc.assert(
      fc.property(fc.json({ depthSize: 'small' }), (text) => {
        const result = parseStrictJson(text);
        if (result.ok) expect(describe_(result.value)).toEqual(describe_(JSON.parse(text)));
        expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
      }),
      { numRuns: 5_000 },
    );
  });

  it('agrees on deep nesting and extreme exponents', () => {
    const texts = [63, 64, 65, 66].flatMap((d) => [
      '['.repeat(d) + ']'.repeat(d),
      '{"a":'.repeat(d) + '1' + '}'.repeat(d),
    ]);
    texts.push('0e99999999999', '1e99999999999', '-1e-99999999999', '-0e-0', '1E+308', '1.8e308', '5e-324', '2e-324');
    for (const text of texts) expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
  });

  it('makes every key an own data property even when Object.prototype has one of that name', () => {
    // A prototype polluted elsewhere in the process (a setter), or frozen (`--frozen-intrinsics`, a hardened
    // realm): an assignment would call the setter and drop the model's key, or throw out of "never throws".
    Object.defineProperty(Object.prototype, 'reviewPollutedSetter', {
      get: () => 'polluted',
      set: () => {},
      configurable: true,
    });
    Object.defineProperty(Object.prototype, 'reviewReadOnly', { value: 'frozen', writable: false, configurable: true });
    try {
      for (const key of ['reviewPollutedSetter', 'reviewReadOnly']) {
        const text = `{"${key}":1,"b":2}`;
        expect(shown(text, parseStrictJson)).toEqual(shown(text, before));
        const result = parseStrictJson(text);
        expect(result.ok && Object.hasOwn(result.value as object, key)).toBe(true);
      }
    } finally {
      delete (Object.prototype as Record<string, unknown>).reviewPollutedSetter;
      delete (Object.prototype as Record<string, unknown>).reviewReadOnly;
    }
  });
});
