/**
 * envelopeText finds the summary's place in the envelope's JSON by a hand scanner (summarySpan) since 4ee188b; the
 * save script keeps those bytes as the task's `summary` field. For any envelope JSON.stringify can write, the span
 * must be exactly the summary's JSON, in UTF-8 bytes, whatever the members before and after it hold.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { envelopeText } from '../src/store/redis/redisEnvelopeText.js';

const text = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.constantFrom('"summary":{}', '\\', '\\"', '}', ']', '{"summary":{"a":1}}', ',"summary":', '\u2028', '\ud800'),
);
const key = fc.oneof(text, fc.constantFrom('summary', 'summar', 'summary ', 'a', '0', '__proto__'));
const value = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    text,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(key, tie('v'), { maxKeys: 3 }),
  ),
})).v;

describe('envelopeText: the summary span', () => {
  it('is the summary JSON in UTF-8 bytes for any members around it', () => {
    fc.assert(
      fc.property(
        fc.dictionary(key, value, { maxKeys: 4 }),
        fc.dictionary(key, value, { maxKeys: 3 }),
        fc.dictionary(key, value, { maxKeys: 4 }),
        (beforeIt, summary, afterIt) => {
          delete beforeIt.summary;
          delete afterIt.summary;
          const envelope = { taskId: 't', ...beforeIt, summary, ...afterIt };
          const found = envelopeText(envelope);
          expect(found.text).toBe(JSON.stringify(envelope));
          const bytes = Buffer.from(found.text, 'utf8');
          expect(found.bytes).toBe(bytes.length);
          const span = bytes.subarray(found.summaryAt, found.summaryAt + found.summaryBytes);
          expect(span.equals(Buffer.from(JSON.stringify(summary), 'utf8'))).toBe(true);
        },
      ),
      { numRuns: 5_000 },
    );
  });
});
