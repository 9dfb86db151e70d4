/**
 * The protocol gate's allocation rewrite (acb3573: plain loops, ids in a list for a short batch, the problems' list
 * made lazily) must give the verdict the gate before it gave (test/support/protocolBefore.ts, as of 2fb63f2) for any
 * batch the model can send: ids missing, blank, duplicated (also past the 16 calls where a set takes over), tools
 * unknown, arguments malformed, too large, or too many calls.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ProposedCall } from '../machines/events.js';
import type { Catalog, Policy } from '../machines/context.js';
import { checkProtocol } from '../machines/lib/protocol.js';
import { checkProtocol as before } from './support/protocolBefore.js';

const catalog = { read: {}, write: {}, hasOwnProperty: {} } as unknown as Catalog;

const call = fc.record({
  callId: fc.constantFrom(undefined, '', ' ', 'a', ' a', 'a ', 'b', 'c', 'x'.repeat(257), 'hasOwnProperty'),
  name: fc.constantFrom('read', 'write', 'nope', 'toString', '__proto__', 'hasOwnProperty'),
  arguments: fc.constantFrom('{}', '{"a":1}', '{"a":1,"a":2}', '[]', '1', '{', '{"x":"' + 'y'.repeat(80) + '"}'),
});

describe('checkProtocol against the gate before the allocation rewrite', () => {
  it('gives the same verdict for any batch', () => {
    fc.assert(
      fc.property(fc.array(call, { maxLength: 24 }), fc.integer({ min: 1, max: 20 }), (raw, maxCalls) => {
        const calls = raw.map((c) => (c.callId === undefined ? { name: c.name, arguments: c.arguments } : c));
        const policy = { maxArgumentBytes: 64, maxCallsPerBatch: maxCalls } as unknown as Policy;
        const typed = calls as unknown as ProposedCall[];
        expect(checkProtocol(typed, catalog, policy)).toEqual(before(typed, catalog, policy));
      }),
      { numRuns: 5_000 },
    );
  });

  it('gives the same verdict for long batches of distinct ids (the set path)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz'), { minLength: 15, maxLength: 26 }),
        fc.boolean(),
        (ids, repeat) => {
          const calls = ids.map((id) => ({ callId: id, name: 'read', arguments: '{}' }));
          if (repeat) calls.push({ callId: ids[ids.length - 1]!, name: 'read', arguments: '{}' });
          const policy = { maxArgumentBytes: 64, maxCallsPerBatch: 30 } as unknown as Policy;
          const typed = calls as unknown as ProposedCall[];
          expect(checkProtocol(typed, catalog, policy)).toEqual(before(typed, catalog, policy));
        },
      ),
      { numRuns: 500 },
    );
  });
});
