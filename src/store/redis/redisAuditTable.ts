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

/** Whether JSON writes `value`, under `key`, in an array as it does in an object (see `tabulableKeys`). */
export function tabulable(key: string, value: unknown): boolean {
  // In an array, JSON writes undefined as null and calls a value's toJSON with the index: such entries stay whole.
  if (key === 'toJSON' || value === undefined || typeof value === 'function' || typeof value === 'symbol') return false;
  return typeof value !== 'object' || value === null || typeof (value as { toJSON?: unknown }).toJSON !== 'function';
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
  for (const key of keys) if (!tabulable(key, (entry as Row)[key])) return null;
  return keys;
}

/** Whether `list` is the first `count` keys of `keys`. */
function sameKeys(list: readonly string[], keys: readonly string[], count: number): boolean {
  if (list.length !== count) return false;
  for (let i = 0; i < count; i++) if (list[i] !== keys[i]) return false;
  return true;
}

/** Up to this many key lists, a row's is found by comparing; beyond, by name. */
const COMPARED_LISTS = 16;

/**
 * Builds a table row by row. A save's entries have a handful of key lists, so a row's is found by comparing it with
 * each (no name is built for it); a message with many key lists names them (joined by NUL; keys may hold any
 * character, NUL too, so a name is checked by comparing the lists).
 */
export class TableWriter implements AuditTable {
  readonly columns: string[][] = [];
  readonly table: unknown[][] = [];
  private byName: Map<string, number> | null = null;

  /** An entry kept whole. */
  literal(entry: unknown): void {
    this.table.push([LITERAL, entry]);
  }

  /**
   * A row: `row` holds a placeholder, then the values of the first `count` of `keys`, in that order (each one
   * `tabulable`). `keys` may be reused by the caller: a new key list is copied.
   */
  add(keys: readonly string[], count: number, row: unknown[]): void {
    row[0] = this.listOf(keys, count);
    this.table.push(row);
  }

  private listOf(keys: readonly string[], count: number): number {
    const columns = this.columns;
    if (this.byName === null) {
      for (let at = 0; at < columns.length; at++) if (sameKeys(columns[at]!, keys, count)) return at;
      const at = columns.push(keys.slice(0, count)) - 1;
      if (columns.length > COMPARED_LISTS) this.byName = new Map(columns.map((list, i) => [list.join('\u0000'), i]));
      return at;
    }
    const name = keys.slice(0, count).join('\u0000');
    const named = this.byName.get(name);
    if (named !== undefined && sameKeys(columns[named]!, keys, count)) return named;
    // Not named yet, or a name two lists share: compared with each.
    for (let at = 0; at < columns.length; at++) if (sameKeys(columns[at]!, keys, count)) return at;
    const at = columns.push(keys.slice(0, count)) - 1;
    if (named === undefined) this.byName.set(name, at);
    return at;
  }
}

export function toTable(entries: readonly unknown[]): AuditTable {
  const writer = new TableWriter();
  for (const entry of entries) {
    const keys = tabulableKeys(entry);
    if (!keys) {
      writer.literal(entry);
      continue;
    }
    const row: unknown[] = [0];
    for (const key of keys) row.push((entry as Row)[key]);
    writer.add(keys, keys.length, row);
  }
  return { columns: writer.columns, table: writer.table };
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
