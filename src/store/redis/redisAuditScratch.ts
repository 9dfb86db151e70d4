/**
 * What packing an audit message (`redisAuditPacking.ts`) reuses from entry to entry and from save to save, so that
 * a save's packing makes the arrays of its message and little else: a read round's eleven entries were packed with
 * about 11.5 KB of JS heap, 7.1 KB now (of which 2.3 KB is the message's JSON).
 */
type Row = Record<string, unknown>;

/** Beyond this many elements, a save's scratch arrays are not kept for the next save. */
const SCRATCH_KEPT = 256;

/**
 * The arrays packing works in, kept from save to save: grown once to a save's sizes rather than again each save, and
 * read only up to what the save wrote in them. What they hold of the entries' values is let go after each save.
 */
export class Scratch {
  /** The keys of the entry being read (`ownKeys`). */
  readonly keys: string[] = [];
  /** The keys of the row being written (the writer copies a new key list). */
  readonly kept: string[] = [];
  /** The row being written: a placeholder for its key list's index, then its values. */
  readonly values: unknown[] = [0];
  /** Each entry's call (`callReferences`), each call's id and how many entries name it. */
  readonly refs: number[] = [];
  readonly ids: string[] = [];
  readonly uses: number[] = [];
  /** An entry's call key values (`callValues`). */
  readonly call: unknown[] = [undefined, undefined, undefined, undefined];

  /** The scratch arrays no packing has, or new ones (a packing of entries whose getter packs finds them taken). */
  static take(): Scratch {
    const scratch = idle ?? new Scratch();
    idle = null;
    return scratch;
  }

  /** After a packing: lets go of the entries' values, and keeps the arrays for the next unless grown too large. */
  static give(scratch: Scratch): void {
    scratch.values.fill(0);
    scratch.call.fill(undefined);
    scratch.ids.fill('');
    const { keys, refs, ids } = scratch;
    if (keys.length <= SCRATCH_KEPT && refs.length <= SCRATCH_KEPT && ids.length <= SCRATCH_KEPT) idle = scratch;
  }
}

/** The scratch arrays, when no packing has them. */
let idle: Scratch | null = null;

/** An object without keys of its own, whose `for...in` finds none unless Object's prototype has enumerable keys. */
const BARE: Row = {};

/**
 * `Object.keys(entry)` into `into` (its first so many, the count returned), without a new array per entry: `for...in`
 * reads the keys V8 keeps with the object's shape. It gives the inherited enumerable keys too: when Object's
 * prototype has any (`BARE` has keys then), the own keys are taken from Object.keys.
 */
export function ownKeys(entry: Row, into: string[]): number {
  let count = 0;
  for (const _ in BARE) {
    const keys = Object.keys(entry);
    for (; count < keys.length; count++) into[count] = keys[count]!;
    return count;
  }
  for (const key in entry) into[count++] = key;
  return count;
}
