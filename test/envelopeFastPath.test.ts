import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CorruptTaskError } from '../src/errors.js';
import { compiledParse, interpreted } from '../src/store/compiledSchema.js';
import { envelopeChecks, parseEnvelope } from '../src/store/envelope.js';
import { migrate } from '../src/store/migrations.js';
import { createRequest } from './support/envelopes.js';

/**
 * The compiled fast path of envelope validation (`compiledSchema.ts`) is held to zod's interpreter: whatever it
 * accepts, the interpreter accepts with the same value, on real envelopes and on many corrupted copies of them.
 */

const ROOT = join(import.meta.dirname, 'fixtures', 'envelopes');
type Raw = Record<string, unknown>;

/** Every stored fixture, migrated to the current machine version as a read does (the `bad-*` ones left out). */
function fixtureEnvelopes(): { name: string; raw: Raw }[] {
  const out: { name: string; raw: Raw }[] = [];
  for (const version of readdirSync(ROOT).filter((dir) => dir.startsWith('agent-'))) {
    for (const file of readdirSync(join(ROOT, version)).filter((f) => f.endsWith('.json') && !f.startsWith('bad-'))) {
      const envelope = JSON.parse(readFileSync(join(ROOT, version, file), 'utf8')).envelope as Raw;
      const machineVersion = envelope.machineVersion as string;
      out.push({ name: `${version}/${file}`, raw: migrate(String(envelope.taskId), machineVersion, envelope) });
    }
  }
  return out;
}

const fixtures = fixtureEnvelopes();
const made = ['running', 'waiting_for_confirmation', 'done'].map((state) => ({
  name: `made ${state}`,
  raw: JSON.parse(
    JSON.stringify(createRequest(`t-${state}`, { state: state as 'running', wakeAt: 1_700_000_600_000 }).envelope),
  ) as Raw,
}));
const envelopes = [...fixtures, ...made];

/** The objects of `input` that `output` holds as they are (not copies). */
function sharedObjects(output: unknown, input: unknown): Set<unknown> {
  const mine = new Set<unknown>();
  const walk = (value: unknown) => {
    if (value && typeof value === 'object' && !mine.has(value)) {
      mine.add(value);
      for (const inner of Object.values(value)) walk(inner);
    }
  };
  walk(input);
  const shared = new Set<unknown>();
  const find = (value: unknown) => {
    if (!value || typeof value !== 'object') return;
    if (mine.has(value)) shared.add(value);
    else for (const inner of Object.values(value)) find(inner);
  };
  find(output);
  return shared;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every path to an object, array or value inside `value`. */
function paths(value: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value))
      paths(inner, [...at, Array.isArray(value) ? Number(key) : key], out);
  }
  return out;
}

const REPLACEMENTS: (() => unknown)[] = [
  () => null,
  () => 0,
  () => -1,
  () => 1.5,
  () => Number.NaN,
  () => Number.POSITIVE_INFINITY,
  () => '',
  () => 'x',
  () => true,
  () => [],
  () => ({}),
  () => [1, 'a', null],
  () => ({ a: 1 }),
  () => undefined,
  () => JSON.parse('{"__proto__": {"a": 1}}'),
  () => new Date(0),
  () => ({ [Symbol('s')]: 1 }),
];

/** A copy of `raw` with one change at `path`: a replaced value, a removed key, or an unknown key added. */
function mutated(raw: Raw, path: (string | number)[], change: number): Raw {
  const copy = structuredClone(raw);
  if (path.length === 0) return copy;
  let parent = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (change === REPLACEMENTS.length) delete parent[last];
  else if (change === REPLACEMENTS.length + 1) {
    const target = parent[last];
    if (target && typeof target === 'object' && !Array.isArray(target)) (target as Raw).unexpected = 1;
    else parent[last] = { unexpected: 1 };
  } else parent[last] = REPLACEMENTS[change]!();
  return copy;
}

describe('the compiled envelope check', () => {
  it('accepts every stored fixture and made envelope, with the value the interpreter gives, copied as far as it copies', () => {
    expect(envelopes.length).toBeGreaterThan(30);
    for (const { name, raw } of envelopes) {
      const full = envelopeChecks.full(raw);
      expect(full.success, name).toBe(true);
      const fast = envelopeChecks.fast(raw);
      expect(fast, name).not.toBeNull();
      expect(fast, name).toStrictEqual(full.data);
      // The interpreter keeps what it does not look into (XState's children) as it is; the fast path no more.
      expect(sharedObjects(fast, raw), name).toStrictEqual(sharedObjects(full.data, raw));
    }
  });

  it('never accepts what the interpreter refuses, and gives its value for what both accept', () => {
    const next = random(20_260_406);
    let refused = 0;
    let accepted = 0;
    for (const { name, raw } of envelopes) {
      const all = paths(raw);
      for (let i = 0; i < 60; i++) {
        const path = all[Math.floor(next() * all.length)]!;
        const change = Math.floor(next() * (REPLACEMENTS.length + 2));
        const input = mutated(raw, path, change);
        const full = envelopeChecks.full(input);
        const fast = envelopeChecks.fast(input);
        const where = `${name} at ${path.join('.')} (change ${change})`;
        if (fast === null) {
          if (!full.success) refused += 1;
          continue;
        }
        accepted += 1;
        expect(full.success, where).toBe(true);
        expect(fast, where).toStrictEqual(full.data);
      }
    }
    // Both kinds occur, so neither half of the comparison is vacuous.
    expect(refused).toBeGreaterThan(500);
    expect(accepted).toBeGreaterThan(200);
  });

  it('is what parseEnvelope uses once a process has read a few envelopes, with the same answers', () => {
    const { raw } = made[0]!;
    const text = JSON.stringify(raw);
    const expected = envelopeChecks.full(raw).data;
    // The first reads are the interpreter's; from the 17th the compiled check answers. Both give the same value.
    for (let i = 0; i < 24; i++) expect(parseEnvelope('t-running', text)).toStrictEqual(expected);
    const corrupt = structuredClone(raw) as { snapshot: { context: { turn: unknown } } };
    corrupt.snapshot.context.turn = -1;
    expect(envelopeChecks.fast(corrupt)).toBeNull();
    const issue = (envelopeChecks.full(corrupt) as { error: { issues: { path: PropertyKey[]; message: string }[] } })
      .error.issues[0]!;
    expect(issue.path.join('.')).toBe('snapshot.context.turn');
    expect(() => parseEnvelope('t-running', JSON.stringify(corrupt))).toThrow(
      new CorruptTaskError('t-running', `invalid envelope at snapshot.context.turn: ${issue.message}`),
    );
  });
});

describe('compiledParse', () => {
  it('refuses without running the rebuilt schema again: the caller runs the interpreter after it anyway', () => {
    let runs = 0;
    const name = z.string().refine(() => {
      runs += 1;
      return true;
    });
    const schema = z.strictObject({ name, count: z.number() });
    const parse = compiledParse(schema, new Map([[name, interpreted(name)]]))!;
    expect(parse({ name: 'a', count: 1 })).toStrictEqual({ success: true, data: { name: 'a', count: 1 } });
    expect(runs).toBe(1);
    // Refused at `count`, after `name` was checked once; a second run of the stand-in would be the runtime fallback.
    expect(parse({ name: 'a', count: 'one' }).success).toBe(false);
    expect(runs).toBe(2);
  });
});

describe('parseEnvelope on stored data nested too deeply to check', () => {
  it('refuses it as corrupt (quarantined on load), not with the stack overflow of the check', () => {
    const { raw } = made[0]!;
    const marked = structuredClone(raw) as { snapshot: { value: unknown } };
    marked.snapshot.value = 'DEEP';
    // JSON.parse takes 100,000 levels; zod's interpreter recurses once or more a level. Whichever check runs first
    // (the compiled one from a process's 17th read), the answer is the same.
    const text = JSON.stringify(marked).replace('"DEEP"', `${'{"a":'.repeat(100_000)}"x"${'}'.repeat(100_000)}`);
    for (let i = 0; i < 18; i++) {
      expect(() => parseEnvelope('t-running', text)).toThrow(CorruptTaskError);
    }
  });
});
