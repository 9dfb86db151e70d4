/**
 * Packing reuses its scratch arrays from save to save (`redisAuditScratch.ts`, 0344377): a differential fuzz against
 * the code just before (`support/redisAuditPackingC7987a3.ts`), on runs of saves whose sizes, keys and calls vary, so
 * that what one save leaves in the arrays meets the next: the same text or the same error, and the same reads of the
 * entries (getters, in order), save after save, through throwing saves, reentrant ones and a polluted prototype.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { packAudit } from '../src/store/redis/redisAuditPacking.js';
import { packAudit as packAuditC7987a3 } from './support/redisAuditPackingC7987a3.js';

type Rng = () => number;
function rng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pick = <T>(r: Rng, list: readonly T[]): T => list[Math.floor(r() * list.length)]!;

const KEYS = ['at', 'turn', 'model', 'prompt', 'policy', 'session', 'callId', 'tool', 'toolVersion', 'argsHash'];
const OTHER = ['kind', 'x', 'y', '0', '7', '__proto__', 'toJSON', 'moves', 'code', 'é'];
const IDS = ['', ...Array.from({ length: 12 }, (_, i) => `c${i}`)];

/** The packing under test, as a getter may call it (reentrant). */
type Pack = (saved: readonly unknown[]) => string;
/** How to make one value, then one entry: a recipe realized anew for each implementation (getters log into `log`). */
type Make = (log: string[], pack: Pack) => unknown;

function valueOf(r: Rng, key: string, stamp: Record<string, unknown>, ids: readonly string[]): Make {
  const roll = r();
  if (roll < 0.9) {
    if (key === 'callId') {
      const id = pick(r, ids);
      return () => id;
    }
    if (key in stamp) return () => stamp[key];
    if (key === 'moves') {
      const text = pick(r, ['0a', '1/b', '', '0a', 'X', 'a b']);
      return () => text;
    }
    if (key === 'at') {
      const at = pick(r, [1000, 1001, 1002, 5, -3, 2 ** 53, 1.5, '1000']);
      return () => at;
    }
    if (key === 'tool' || key === 'toolVersion' || key === 'argsHash') {
      const text = pick(r, ['t', 'u', null, 't']);
      return () => text;
    }
    if (key === 'model' || key === 'prompt') {
      const copy = pick(r, ['m', 'p', { v: 1 }]);
      return () => (typeof copy === 'object' ? { ...copy } : copy);
    }
  }
  const v = pick(r, [0, 1, -0, NaN, 'v', 'w', null, undefined, true, 'big', 'fn', 'sym', 'obj', 'arr', 'date', 'c1']);
  if (v === 'big') {
    const big = r() < 0.3;
    return () => (big ? 10n : 10);
  }
  if (v === 'fn') return () => () => 1;
  if (v === 'sym') return () => Symbol('s');
  if (v === 'obj') return () => ({ a: 1, b: [null] });
  if (v === 'arr') return () => [1, 'two'];
  if (v === 'date') return () => new Date(0);
  return () => v;
}

const CALL_KEYS = ['callId', 'tool', 'toolVersion', 'argsHash'];

function entryOf(r: Rng, stamp: Record<string, unknown>, ids: readonly string[], depth = 0): Make {
  const kind = r();
  if (kind < 0.03) return () => null;
  if (kind < 0.05) return () => [1, 2];
  if (kind < 0.06) return () => 'text';
  const keys: string[] = [];
  const add = (key: string) => {
    if (!keys.includes(key)) keys.push(key);
  };
  if (r() < 0.75) {
    // As the runtime writes them: at, turn, the stamp, a kind, a call's keys, more, moves last.
    for (const key of ['at', 'turn', 'model', 'prompt', 'policy', 'session']) if (r() < 0.95) add(key);
    add('kind');
    if (r() < 0.7) for (const key of CALL_KEYS) if (r() < 0.8) add(key);
    if (r() < 0.3) add(pick(r, OTHER));
    if (r() < 0.6) add('moves');
  } else {
    const count = Math.floor(r() * 14);
    for (let i = 0; i < count; i++) add(r() < 0.75 ? pick(r, KEYS) : pick(r, OTHER));
  }
  const values = keys.map((key) => valueOf(r, key, stamp, ids));
  const shape = r();
  const getters = keys.map(() => r() < 0.05);
  const throwing = r() < 0.01 ? Math.floor(r() * (keys.length + 1)) : -1;
  // A getter that packs other entries meanwhile, with the same code.
  const reentrant = depth === 0 && keys.length > 0 && r() < 0.03 ? Math.floor(r() * keys.length) : -1;
  const inner = reentrant >= 0 ? saveOf(r, 1) : null;
  return (log, pack) => {
    const entry: Record<string, unknown> =
      shape < 0.05 ? Object.create(null) : shape < 0.07 ? new (class Entry {})() : {};
    keys.forEach((key, k) => {
      const made = values[k]!(log, pack);
      if (getters[k] || k === throwing || k === reentrant)
        Object.defineProperty(entry, key, {
          get: () => {
            log.push(key);
            if (k === throwing) throw new Error(`getter ${key}`);
            if (k === reentrant) log.push(outcome(pack, inner!(log, pack) as unknown[], log));
            return made;
          },
          enumerable: true,
          configurable: true,
        });
      else define(entry, key, made);
    });
    if (shape >= 0.07 && shape < 0.08 && !keys.includes('toJSON')) define(entry, 'toJSON', () => ({ n: keys.length }));
    return entry;
  };
}

/** An own key as a literal makes it (`__proto__` included, whatever Object.prototype has). */
const define = (entry: object, key: string, value: unknown) =>
  Object.defineProperty(entry, key, { value, writable: true, enumerable: true, configurable: true });

/** A save's entries: most share a stamp (the same object, or an equal copy) and a few calls. */
function saveOf(r: Rng, depth = 0): Make {
  const stamp: Record<string, unknown> = { model: 'm', prompt: pick(r, ['p', { v: 1 }]), policy: 'q', session: 's' };
  const length = depth > 0 ? pick(r, [2, 5, 11]) : pick(r, [0, 1, 2, 3, 5, 11, 11, 20, 40, 300]);
  // One or two calls most often, beyond the eight compared one by one at times.
  const ids = IDS.slice(0, pick(r, [1, 2, 2, 3, 9, 12]));
  const entries = Array.from({ length }, () => (depth > 0 ? entryOf(r, stamp, ids, depth) : entryOf(r, stamp, ids)));
  return (log, pack) => entries.map((make) => make(log, pack));
}

function outcome(pack: Pack, saved: unknown[], log: string[]): string {
  try {
    return pack(saved);
  } catch (error) {
    return `${(error as Error).constructor.name}: ${(error as Error).message}`;
  } finally {
    log.push('|');
  }
}

/** Packs the same run of saves with both, each save in turn (the current code's scratch carried along). */
function sameRun(seed: number, saves: number): number {
  const r = rng(seed);
  const run = Array.from({ length: saves }, () => saveOf(r));
  const logs: [string[], string[]] = [[], []];
  let packedCount = 0;
  for (const save of run) {
    const now = outcome(packAudit, save(logs[0], packAudit) as unknown[], logs[0]);
    const before = outcome(packAuditC7987a3, save(logs[1], packAuditC7987a3) as unknown[], logs[1]);
    if (now !== before) expect.fail(`seed ${seed}: ${now}\n  before: ${before}`);
    if (now.startsWith('{')) packedCount += 1;
  }
  expect(logs[0]).toEqual(logs[1]);
  return packedCount;
}

describe('audit packing with scratch arrays kept from save to save, against the code before them', () => {
  it('packs 1,000 runs of saves as before: the same text or error, the same getter reads', () => {
    let packedCount = 0;
    for (let seed = 1; seed <= 1000; seed++) packedCount += sameRun(seed, 6);
    // A fair share of the saves share something (a packed message, not a plain array): the fuzz reaches the packing.
    expect(packedCount).toBeGreaterThan(1200);
  });

  it('packs as before with Object.prototype polluted between saves', () => {
    for (let seed = 5001; seed <= 5200; seed++) {
      Object.defineProperty(Object.prototype, 'tool', {
        value: 'p',
        writable: true,
        enumerable: seed % 2 === 0,
        configurable: true,
      });
      try {
        sameRun(seed, 3);
      } finally {
        delete (Object.prototype as Record<string, unknown>).tool;
      }
      sameRun(seed + 10_000, 2);
    }
  });

  it('keeps no value of a save once it is packed (the scratch arrays let go of them)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const refs: WeakRef<object>[] = [];
    (() => {
      const stamp = { model: 'm', prompt: 'p', policy: 'q', session: 's' };
      const entries = [0, 1, 2].map((n) => {
        const detail = { n, text: 'x'.repeat(100) };
        refs.push(new WeakRef(detail));
        return { at: 1000 + n, turn: 0, ...stamp, kind: 'a', callId: 'c1', tool: 't', detail };
      });
      expect(packAudit(entries)).toMatch(/^\{"stamp"/);
    })();
    // A WeakRef holds its target until the job that made it ends.
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(refs.map((ref) => ref.deref())).toEqual([undefined, undefined, undefined]);
  });
});
