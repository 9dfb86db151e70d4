/**
 * fast-check arbitraries for model tool-call proposals: call ids (missing, blank, padded, duplicated, too long),
 * tool names (known, unknown, prototype keys), argument texts (objects, duplicate keys including \u-escaped
 * spellings, truncated JSON, non-objects, oversized, random text), each labelled so an independent oracle can say
 * what the protocol gate must decide.
 */
import fc from 'fast-check';
import type { ProposedCall } from '../../machines/events.js';
import { CATALOG, INPUT } from './agentWorld.js';

export type ArgsKind = 'object' | 'duplicate_key' | 'truncated' | 'not_object' | 'too_large' | 'random';

const objectText = fc
  .dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
  .map((value) => JSON.stringify(value));

const argsArb: fc.Arbitrary<{ text: string; kind: ArgsKind }> = fc.oneof(
  objectText.map((text) => ({ text, kind: 'object' as const })),
  fc
    .tuple(
      fc.string({ minLength: 1, maxLength: 6 }),
      fc.jsonValue({ maxDepth: 1 }),
      fc.jsonValue({ maxDepth: 1 }),
      fc.boolean(),
    )
    .map(([key, a, b, escaped]) => {
      // The same key twice, once possibly spelled with \u escapes: JSON.parse would silently keep the last.
      const units = Array.from({ length: key.length }, (_, i) => key.charCodeAt(i));
      const second = escaped
        ? `"${units.map((u) => `\\u${u.toString(16).padStart(4, '0')}`).join('')}"`
        : JSON.stringify(key);
      return {
        text: `{${JSON.stringify(key)}:${JSON.stringify(a)},${second}:${JSON.stringify(b)}}`,
        kind: 'duplicate_key' as const,
      };
    }),
  objectText
    .filter((text) => text.length > 2)
    .chain((text) =>
      fc
        .integer({ min: 1, max: text.length - 1 })
        .map((cut) => ({ text: text.slice(0, cut), kind: 'truncated' as const })),
    ),
  fc
    .jsonValue({ maxDepth: 2 })
    .filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
    .map((v) => ({ text: JSON.stringify(v), kind: 'not_object' as const })),
  fc.constant({
    text: JSON.stringify({ note: 'x'.repeat(INPUT.policy.maxArgumentBytes) }),
    kind: 'too_large' as const,
  }),
  fc.string({ maxLength: 24 }).map((text) => ({ text, kind: 'random' as const })),
);

const callIdArb = fc.oneof(
  fc.constantFrom(undefined, '', '   ', 'c1', 'c2', ' c1', 'c1 ', 'x'.repeat(257)),
  fc.string({ maxLength: 8 }),
);
const toolArb = fc.oneof(
  fc.constantFrom(...Object.keys(CATALOG)),
  fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'Search_Rooms', ''),
  fc.string({ maxLength: 10 }),
);

export interface FuzzCall {
  call: ProposedCall;
  kind: ArgsKind;
}
export const proposalArb = fc.array(
  fc.record({ callId: callIdArb, name: toolArb, args: argsArb }).map(({ callId, name, args }): FuzzCall => ({
    call: callId === undefined ? { name, arguments: args.text } : { callId, name, arguments: args.text },
    kind: args.kind,
  })),
  { minLength: 1, maxLength: 4 },
);

/** The protocol decision an independent reading of the rules expects, or null where it cannot tell (random text). */
export function expectedVerdict(calls: FuzzCall[]): 'unpairable' | 'rejected' | 'accepted' | null {
  const ids = calls.map((c) => c.call.callId?.trim() ?? '');
  if (ids.some((id) => id === '' || id.length > 256) || new Set(ids).size !== ids.length) return 'unpairable';
  if (calls.length > INPUT.policy.maxCallsPerBatch) return 'rejected';
  let unsure = false;
  for (const { call, kind } of calls) {
    if (!Object.hasOwn(CATALOG, call.name)) return 'rejected';
    if (Buffer.byteLength(call.arguments, 'utf8') > INPUT.policy.maxArgumentBytes) return 'rejected';
    if (kind === 'duplicate_key' || kind === 'truncated' || kind === 'not_object' || kind === 'too_large')
      return 'rejected';
    if (kind === 'random') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(call.arguments);
      } catch {
        return 'rejected';
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'rejected';
      unsure = true; // JSON.parse hides duplicate keys
    }
  }
  return unsure ? null : 'accepted';
}
