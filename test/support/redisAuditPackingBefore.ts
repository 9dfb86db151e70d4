// A copy of src/store/redis/redisAuditPacking.ts as of d116778, before the save path's rework: the differential tests
// (test/redisSaveTextDiff.test.ts) compare the current code with it. Not used by the library.
/**
 * How the audit entries of one save are kept in their Redis stream message. The entries of one save repeat a lot:
 * every entry of agent/5 on carries the same stamp (model, prompt, policy, session) as the others of its save,
 * except the few a user's event caused, and the entries about one call repeat its id, tool, tool version and
 * arguments hash (a round of one read makes about ten). Both are kept once per message:
 *
 * - the stamp once, left out of the entries that share it (listed in `shared`);
 * - each call several entries name (the values of `callId`, `tool`, `toolVersion`, `argsHash` they have) once, in
 *   `calls`; an entry listed in `called` as `[entry, call]` keeps those keys, in their place, with the value 0;
 * - times as offsets from the first entry's (`since`), except in the entries listed in `absolute`;
 * - the transitions each entry recorded (`moves`, its last key, written by the runtime), as one string for the message
 *   (`moves`: the entries' values joined by spaces, `-` for an entry without one), so that no key list names them;
 * - the entries so packed as a table: each distinct key list once (`columns`), each entry as its values
 *   (`redisAuditTable.ts`).
 *
 * That keeps about half of the audit's bytes out of Redis (a read round's entries: 1,890 B instead of 3,928 B as a
 * plain array; 3,029 B with the stamp alone kept once).
 * Reading puts everything back, keys in their order, so what `readJournal` returns is what was saved.
 *
 * A message is a JSON array (unpacked: older saves, and saves whose entries share nothing) or
 * `{ "stamp"?: {...}, "shared": [indexes], "since"?: ms, "absolute"?: [indexes], "calls"?: [{...}], "called"?: [[index, call]],
 * "moves"?: "text", "columns": [[keys]], "table": [[column, ...values]] }`, where the indexes count entries. Earlier forms still read:
 * `"rows": [entries]` in place of the table (builds of 0.4.0 before it was released), and `{ "stamp", "shared",
 * "entries" }` (before 0.4.0). Each form names its entries differently, so an earlier version refuses a message it
 * would misread.
 */
import { TableWriter, put, tabulable } from '../../src/store/redis/redisAuditTable.js';

const STAMP_KEYS = ['model', 'prompt', 'policy', 'session'] as const;
const CALL_KEYS = ['toolVersion', 'callId', 'tool', 'argsHash'] as const;
const STAMP_SET = new Set<string>(STAMP_KEYS);
const CALL_SET = new Set<string>(CALL_KEYS);
/** What a packed entry holds in place of a call key's value. */
const PLACEHOLDER = 0;
/** In the message's `moves`: the entry has none. */
const NO_MOVES = '-';
/** A `moves` value that its message's string can hold: the runtime's alphabet (`src/audit/chartMoves.ts`). */
const MOVES_TEXT = /^[0-9a-z/]*$/;

type Row = Record<string, unknown>;

const isRow = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A plain object whose JSON is its own keys (no `toJSON`, no class): packing takes those apart. */
function isPlainRow(value: unknown): value is Row {
  if (!isRow(value) || Object.hasOwn(value, 'toJSON')) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A value JSON writes as an object member (JSON leaves out undefined, functions and symbols). */
const inJson = (value: unknown) => value !== undefined && typeof value !== 'function' && typeof value !== 'symbol';

/** An entry as packing sees it: a plain row as it is, anything else as what its JSON reads back as. */
function asPackable(entry: unknown): unknown {
  if (isPlainRow(entry) || !isRow(entry)) return entry;
  const text = JSON.stringify(entry);
  return text === undefined ? null : JSON.parse(text);
}

/** The entries as packing sees them (`asPackable`): the very list when each already is. */
function packable(saved: readonly unknown[]): readonly unknown[] {
  for (const entry of saved) if (isRow(entry) && !isPlainRow(entry)) return saved.map(asPackable);
  return saved;
}

/** The keys before the stamp's, then the stamp's, in the order reading puts them back. */
const IN_PLACE = ['at', 'turn', ...STAMP_KEYS] as const;

/**
 * The stamp keys stand where reading puts them back: after `at` and `turn` (when the entry has them, `at` first),
 * before the entry's other keys, in their order. `keys`: the entry's own keys, of which the first `end` count (the
 * runtime's `moves` may follow); only those JSON writes are looked at.
 */
function stampInPlace(entry: Row, keys: readonly string[], end: number): boolean {
  // `next`: the position among the keys JSON writes that the next key present must hold.
  let next = 0;
  for (const key of IN_PLACE) {
    const at = keys.indexOf(key);
    if (at < 0 || at >= end || !inJson(entry[key])) continue;
    while (next < end && !inJson(entry[keys[next]!])) next += 1;
    if (keys[next] !== key) return false;
    next += 1;
  }
  return true;
}

/** Equal as JSON: the same value (most stamps of one save are the same objects), or the same JSON text. */
const sameJson = (a: unknown, b: unknown) =>
  a === b || (typeof a === 'object' && typeof b === 'object' && JSON.stringify(a) === JSON.stringify(b));

/** Whether `entry` has the stamp of `first` (each stamp value equal as JSON). */
function sameStamp(entry: Row, first: Row): boolean {
  for (const key of STAMP_KEYS) if (!sameJson(entry[key], first[key])) return false;
  return true;
}

/** The call an entry names, by the call keys it has, when its `callId` is a string and each of them a string or null. */
function callKeysOf(entry: Row): Row | null {
  if (typeof entry.callId !== 'string') return null;
  const keys: Row = {};
  for (const name of CALL_KEYS) {
    if (!(name in entry)) continue;
    const value = entry[name];
    if (value !== null && typeof value !== 'string') return null;
    keys[name] = value;
  }
  return keys;
}

/**
 * For each entry, the index in `calls` of the identity it shares with other entries (or -1): one identity per call id,
 * the union of the call keys its entries have (an entry may lack some, e.g. a tool's end has no arguments hash); an
 * entry whose value differs from its call's keeps its own.
 */
function callReferences(entries: readonly unknown[], calls: Row[]): number[] {
  const byId = new Map<string, number>();
  const refs = entries.map((entry) => {
    const keys = isPlainRow(entry) ? callKeysOf(entry) : null;
    if (!keys) return -1;
    const id = keys.callId as string;
    const at = byId.get(id);
    if (at === undefined) {
      byId.set(id, calls.length);
      // The entry's own object: none else holds it.
      return calls.push(keys) - 1;
    }
    const call = calls[at]!;
    for (const name of CALL_KEYS) if (name in keys && name in call && call[name] !== keys[name]) return -1;
    Object.assign(call, keys);
    return at;
  });
  // Only an identity several entries share gains from being kept once; the others are dropped and renumbered.
  const uses = new Array<number>(calls.length).fill(0);
  for (const at of refs) if (at >= 0) uses[at]! += 1;
  const renumbered = uses.map(() => -1);
  const kept: Row[] = [];
  calls.forEach((call, at) => {
    if (uses[at]! > 1) renumbered[at] = kept.push(call) - 1;
  });
  calls.splice(0, calls.length, ...kept);
  return refs.map((at) => (at >= 0 ? renumbered[at]! : -1));
}

/**
 * The stream message text of one save's audit entries. It goes from the entries straight to the table's rows (each
 * entry's values once, into its row; no packed copy of the entry in between) and to the message's JSON.
 */
export function packAudit(saved: readonly unknown[]): string {
  if (saved.length < 2) return plain(saved);
  const entries = packable(saved);
  const first = isPlainRow(entries[0]) ? entries[0] : null;
  const stamped = first !== null && STAMP_KEYS.every((key) => key in first);
  const calls: Row[] = [];
  const refs = callReferences(entries, calls);
  const since = first !== null && Number.isSafeInteger(first.at) ? (first.at as number) : null;
  const shared: number[] = [];
  const called: [number, number][] = [];
  const absolute: number[] = [];
  let moves = '';
  let moved = false;
  const writer = new TableWriter();
  // The keys of the row being written (reused from row to row: the writer copies a new key list).
  const kept: string[] = [];
  for (let index = 0; index < entries.length; index++) {
    const entry = entries[index];
    if (index > 0) moves += ' ';
    if (!isPlainRow(entry)) {
      moves += NO_MOVES;
      // Kept whole, its time too: reading offsets the time of every object not listed as absolute.
      if (since !== null && isRow(entry) && 'at' in entry) absolute.push(index);
      writer.literal(entry);
      continue;
    }
    const keys = Object.keys(entry);
    let end = keys.length;
    if (keys[end - 1] === 'moves' && typeof entry.moves === 'string' && MOVES_TEXT.test(entry.moves)) {
      moves += entry.moves;
      moved = true;
      end -= 1;
    } else moves += NO_MOVES;
    const stampShared = stamped && sameStamp(entry, first) && stampInPlace(entry, keys, end);
    if (stampShared) shared.push(index);
    let offset = false;
    if (since !== null && Object.hasOwn(entry, 'at') && inJson(entry.at)) {
      offset = Number.isSafeInteger(entry.at) && Number.isSafeInteger((entry.at as number) - since);
      if (!offset) absolute.push(index);
    }
    const ref = refs[index]!;
    if (ref >= 0) called.push([index, ref]);
    // Sized for every key at once (no growing as values are added), then cut to the values kept.
    const row = new Array<unknown>(end + 1);
    let count = 0;
    let whole = true;
    for (let k = 0; k < end; k++) {
      const key = keys[k]!;
      if (stampShared && STAMP_SET.has(key)) continue;
      const value =
        key === 'at' && offset
          ? (entry.at as number) - since!
          : ref >= 0 && CALL_SET.has(key)
            ? PLACEHOLDER
            : entry[key];
      if (!tabulable(key, value)) {
        whole = false;
        break;
      }
      kept[count] = key;
      count += 1;
      row[count] = value;
    }
    row.length = count + 1;
    if (whole) writer.add(kept, count, row);
    else writer.literal(packedEntry(entry, keys, end, stampShared, offset ? since : null, ref >= 0, end < keys.length));
  }
  if (shared.length === 0 && called.length === 0) return plain(saved);
  const message: Row = {};
  if (shared.length > 0) message.stamp = Object.fromEntries(STAMP_KEYS.map((key) => [key, (first as Row)[key]]));
  message.shared = shared;
  if (since !== null) {
    message.since = since;
    if (absolute.length > 0) message.absolute = absolute;
  }
  if (called.length > 0) {
    message.calls = calls;
    message.called = called;
  }
  if (moved) message.moves = moves;
  message.columns = writer.columns;
  message.table = writer.table;
  return JSON.stringify(message);
}

/**
 * An entry a table row cannot hold (a value JSON writes otherwise in an array), as packed: without the stamp it
 * shares, its time as an offset from `since`, its call keys as placeholders, without its `moves`; the entry itself
 * when none of those apply.
 */
function packedEntry(
  entry: Row,
  keys: readonly string[],
  end: number,
  stampShared: boolean,
  since: number | null,
  called: boolean,
  moved: boolean,
): Row {
  if (!stampShared && since === null && !called && !moved) return entry;
  // One new object, its keys in their order.
  const out: Row = {};
  for (let k = 0; k < end; k++) {
    const key = keys[k]!;
    if (stampShared && STAMP_SET.has(key)) continue;
    if (key === 'at' && since !== null) out.at = (entry.at as number) - since;
    else if (called && CALL_SET.has(key)) out[key] = PLACEHOLDER;
    else put(out, key, entry[key]);
  }
  return out;
}

function plain(entries: readonly unknown[]): string {
  return `[${entries.map((entry) => JSON.stringify(entry) ?? 'null').join(',')}]`;
}
