/**
 * The packed entries of one audit message as a table: the entries of a save have few distinct key lists (a read
 * round's thirteen entries have six), so each key list is kept once, in `columns`, and each entry as an array, its
 * key list's index, then its values in that order. An entry that is not a plain JSON object (or has a value JSON
 * leaves out, such as `undefined`) is kept as `[-1, entry]`. Reading builds each object back with its keys in their
 * order (own `__proto__` keys included), so a table reads back as the JSON of the entries it was made from.
 *
 * That keeps the key names of a read round's message once instead of thirteen times: about a quarter of its bytes.
 */
type Row = Record<string, unknown>;

/** What an entry that is not tabulated has in place of a key list's index. */
const LITERAL = -1;

export interface AuditTable {
  columns: string[][];
  table: unknown[][];
}

/**
 * The keys of a plain object whose JSON is its own keys and values (no `toJSON`, no value JSON would leave out or
 * write otherwise in an array); null for anything else.
 */
function tabulableKeys(entry: unknown): string[] | null {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return null;
  const proto = Object.getPrototypeOf(entry);
  if (proto !== Object.prototype && proto !== null) return null;
  const keys = Object.keys(entry);
  for (const key of keys) {
    const value = (entry as Row)[key];
    // In an array, JSON writes undefined as null and calls a value's toJSON with the index: such entries stay whole.
    if (key === 'toJSON' || value === undefined || typeof value === 'function' || typeof value === 'symbol')
      return null;
    if (typeof (value as { toJSON?: unknown } | null)?.toJSON === 'function') return null;
  }
  return keys;
}

const sameKeys = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((key, i) => key === b[i]);

export function toTable(entries: readonly unknown[]): AuditTable {
  const columns: string[][] = [];
  const byName = new Map<string, number>();
  const table = entries.map((entry) => {
    const keys = tabulableKeys(entry);
    if (!keys) return [LITERAL, entry];
    // Keys may hold any character, NUL too: a name two different lists share is caught by comparing them.
    const name = keys.join('\u0000');
    let at = byName.get(name);
    if (at === undefined) {
      at = columns.push(keys) - 1;
      byName.set(name, at);
    } else if (!sameKeys(columns[at]!, keys)) {
      at = columns.push(keys) - 1;
    }
    const row: unknown[] = [at];
    for (const key of keys) row.push((entry as Row)[key]);
    return row;
  });
  return { columns, table };
}

/** Sets an own key, `__proto__` included (JSON.parse makes it an own key; an assignment would set the prototype). */
export function put(row: Row, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(row, key, { value, writable: true, enumerable: true, configurable: true });
  else row[key] = value;
}

/** The key lists of a parsed message: arrays of distinct strings; null otherwise. */
function keyLists(value: unknown): string[][] | null {
  if (!Array.isArray(value)) return null;
  for (const keys of value) {
    if (!Array.isArray(keys) || !keys.every((key) => typeof key === 'string') || new Set(keys).size !== keys.length)
      return null;
  }
  return value as string[][];
}

/** The entries of a parsed table, or null when it does not add up (an unknown key list, a row of the wrong length). */
export function fromTable(columns: unknown, table: unknown): unknown[] | null {
  const lists = keyLists(columns);
  if (!lists || !Array.isArray(table)) return null;
  const entries: unknown[] = [];
  for (const row of table) {
    if (!Array.isArray(row)) return null;
    const at = row[0];
    if (at === LITERAL) {
      if (row.length !== 2) return null;
      entries.push(row[1]);
      continue;
    }
    const keys = Number.isInteger(at) ? lists[at as number] : undefined;
    if (!keys || row.length !== keys.length + 1) return null;
    const entry: Row = {};
    keys.forEach((key, i) => put(entry, key, row[i + 1]));
    entries.push(entry);
  }
  return entries;
}
