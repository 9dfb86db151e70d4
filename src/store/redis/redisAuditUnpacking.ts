/**
 * Reading an audit stream message back (`redisAuditPacking.ts` says how one is packed): everything the packing left
 * out is put back, keys in their order, so what `readJournal` returns is what was saved. A message that does not add
 * up is refused (null), never guessed at.
 */
import { fromTable, put } from './redisAuditTable.js';
import {
  CALL_SET,
  MOVES_TEXT,
  NO_MOVES,
  PLACEHOLDER,
  STAMP_SET,
  indexList,
  isRow,
  type Row,
} from './redisAuditPacking.js';

/** The entries of a parsed stream message, or null when it is neither form (or a packed one that does not add up). */
export function unpackAudit(message: unknown): unknown[] | null {
  if (Array.isArray(message)) return message;
  if (!isRow(message)) return null;
  // `table`: packed with calls and times, as a table; `rows`: the same as objects (unreleased 0.4.0 builds);
  // `entries`: the stamp alone (before 0.4.0).
  const forms = [message.table, message.rows, message.entries].filter((form) => form !== undefined).length;
  if (forms !== 1 || (message.columns !== undefined) !== (message.table !== undefined)) return null;
  const entries =
    message.table !== undefined ? fromTable(message.columns, message.table) : (message.rows ?? message.entries);
  if (!Array.isArray(entries)) return null;
  const shared = indexList(message.shared, entries.length);
  if (!shared) return null;
  const { stamp } = message;
  // A stamp goes with the entries that share it: one without any (or any without one) was not written so. (A stamp
  // value that was undefined is not in the JSON, as it would not be in the entry's.)
  if (shared.length > 0 ? !isRow(stamp) || !Object.keys(stamp).every((key) => STAMP_SET.has(key)) : stamp !== undefined)
    return null;
  const since = message.since ?? null;
  if (since !== null && !Number.isSafeInteger(since)) return null;
  const absolute = indexList(message.absolute ?? [], entries.length);
  if (!absolute || (since === null && absolute.length > 0)) return null;
  const calls = message.calls ?? [];
  const called = message.called ?? [];
  if (!Array.isArray(calls) || !Array.isArray(called)) return null;
  if (
    !calls.every(
      (call) =>
        isRow(call) &&
        Object.entries(call).every(
          ([key, value]) => CALL_SET.has(key) && (value === null || typeof value === 'string'),
        ),
    )
  )
    return null;
  const callOf = new Map<number, Row>();
  for (const pair of called) {
    if (!Array.isArray(pair) || pair.length !== 2) return null;
    const [index, at] = pair as unknown[];
    if (
      !Number.isInteger(index) ||
      (index as number) < 0 ||
      (index as number) >= entries.length ||
      callOf.has(index as number)
    )
      return null;
    if (!Number.isInteger(at) || !isRow(calls[at as number])) return null;
    callOf.set(index as number, calls[at as number] as Row);
  }
  let moves: string[] | null = null;
  if (message.moves !== undefined) {
    if (typeof message.moves !== 'string') return null;
    moves = message.moves.split(' ');
    if (moves.length !== entries.length || !moves.every((m) => m === NO_MOVES || MOVES_TEXT.test(m))) return null;
  }
  const sharedSet = new Set(shared);
  const absoluteSet = new Set(absolute);
  const whole: unknown[] = [];
  for (let index = 0; index < entries.length; index++) {
    const entry = entries[index];
    const call = callOf.get(index);
    const offset = since !== null && isRow(entry) && 'at' in entry && !absoluteSet.has(index);
    const moved = moves !== null && moves[index] !== NO_MOVES ? moves[index]! : null;
    if (!isRow(entry)) {
      if (call || sharedSet.has(index) || absoluteSet.has(index) || moved !== null) return null;
      whole.push(entry);
      continue;
    }
    if (absoluteSet.has(index) && !('at' in entry)) return null;
    let out: Row = entry;
    if (call || offset) out = { ...entry };
    if (call) {
      for (const [name, value] of Object.entries(call)) {
        if (!(name in out)) continue;
        if (out[name] !== PLACEHOLDER) return null;
        out[name] = value;
      }
    }
    if (offset) {
      if (!Number.isSafeInteger(out.at)) return null;
      out.at = (since as number) + (out.at as number);
    }
    if (sharedSet.has(index)) out = withStamp(out, stamp as Row);
    if (moved !== null) {
      if ('moves' in out) return null;
      if (out === entry) out = { ...entry };
      out.moves = moved;
    }
    whole.push(out);
  }
  return whole;
}

/** The stamp goes back where it was: after `at` and `turn`, before the entry's own fields. */
function withStamp(entry: Row, stamp: Row): Row {
  const whole: Row = {};
  if ('at' in entry) whole.at = entry.at;
  if ('turn' in entry) whole.turn = entry.turn;
  for (const [key, value] of Object.entries(stamp)) put(whole, key, value);
  for (const [key, value] of Object.entries(entry)) if (key !== 'at' && key !== 'turn') put(whole, key, value);
  return whole;
}
