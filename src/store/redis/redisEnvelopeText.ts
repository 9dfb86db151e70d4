/**
 * The envelope's JSON as a save sends it: whole, or as edits of the text this process saved last for the task.
 *
 * A round changes a few parts of the envelope (revision, times, summary, budget, the batch, the model's input) and
 * leaves the rest as it was (the policy, the catalog, the principal, most of the context): about half of a read
 * round's 4 KB. The text is written in segments (`envelopeText`: one per member of the envelope, its snapshot and the
 * plain objects within, down to `DEPTH`), whose concatenation is `JSON.stringify(envelope)`; a save compares them with
 * those of the last save this process made of the task (`SavedTexts`) and sends only the ones that differ, as edits
 * of the stored text (`envelopeEdits`), which the save script splices into the stored text. What Redis keeps is the
 * same text as before: the stored format is unchanged.
 *
 * The script splices only onto the text it was computed from: the task hash records which save wrote its envelope
 * (the `etag` field: the writing store's id and the revision), and an edit of another text is refused, the save then
 * sending its text whole (see `lua/save.lua`).
 */

/** How deep the plain objects of the envelope are taken apart (the envelope is depth 0). */
const DEPTH = 5;
/** Unchanged runs shorter than this many bytes between two changed ones are sent again rather than cost an edit. */
const GAP = 12;

export interface EnvelopeText {
  /** The segments, in order: their concatenation is the envelope's JSON. */
  segments: string[];
  /** Each segment's length in UTF-8 bytes. */
  bytes: number[];
  /** The whole text's length in bytes. */
  total: number;
  /** Where the summary's JSON starts in the text (bytes), and its length. */
  summaryAt: number;
  summaryBytes: number;
}

type Row = Record<string, unknown>;

/** A plain object whose JSON is written member by member (no `toJSON`, no class). */
function isPlain(value: unknown): value is Row {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && typeof (value as Row).toJSON !== 'function';
}

/** Bytes of a string in UTF-8: its length when it is all ASCII (the common case, checked cheaply by the encoder). */
const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');

const keyTexts = new Map<string, string>();
/** `"key":`, kept for the keys seen (a task's envelope has the same few hundred keys every save). */
function keyText(key: string): string {
  let text = keyTexts.get(key);
  if (text === undefined) {
    text = `${JSON.stringify(key)}:`;
    if (keyTexts.size < 4096) keyTexts.set(key, text);
  }
  return text;
}

class Writer {
  readonly segments: string[] = [];
  readonly bytes: number[] = [];
  total = 0;
  summaryAt = -1;
  summaryBytes = 0;

  push(text: string): number {
    const size = utf8Bytes(text);
    this.segments.push(text);
    this.bytes.push(size);
    this.total += size;
    return size;
  }

  /**
   * The members of a plain object: each member (`,"key":value`, the first without the comma, after `prefix` and `{`),
   * then `}`. A member holding a plain object (to `DEPTH`) is taken apart in turn, its `{` after the member's key.
   */
  object(row: Row, depth: number, prefix: string): void {
    let pending = `${prefix}{`;
    let first = true;
    for (const key in row) {
      if (!Object.hasOwn(row, key)) continue;
      const value = row[key];
      if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
      const nested = depth < DEPTH && isPlain(value) && !(depth === 0 && key === 'summary');
      let json: string | undefined;
      if (!nested) {
        // A value with toJSON (called with its key, as JSON does) or any other: JSON's own text of the member.
        json =
          typeof value === 'object' && value !== null && typeof (value as Row).toJSON === 'function'
            ? memberJson(key, value)
            : JSON.stringify(value);
        // toJSON gave nothing JSON writes: the member is left out, as JSON leaves it.
        if (json === undefined) continue;
      }
      const head = `${pending}${first ? '' : ','}${keyText(key)}`;
      pending = '';
      first = false;
      if (nested) {
        this.object(value, depth + 1, head);
        continue;
      }
      const before = this.total;
      const size = this.push(head + json!);
      if (depth === 0 && key === 'summary') {
        this.summaryBytes = utf8Bytes(json!);
        this.summaryAt = before + size - this.summaryBytes;
      }
    }
    this.push(first ? `${pending}}` : '}');
  }
}

/** JSON's text of `value` as the member `key` of an object (its toJSON called with the key), or undefined. */
function memberJson(key: string, value: unknown): string | undefined {
  const text = JSON.stringify({ [key]: value });
  return text === '{}' ? undefined : text.slice(keyText(key).length + 1, -1);
}

/** The envelope's JSON in segments (their concatenation is `JSON.stringify(envelope)`). */
export function envelopeText(envelope: object): EnvelopeText {
  const writer = new Writer();
  writer.object(envelope as Row, 0, '');
  const { segments, bytes, total, summaryAt, summaryBytes } = writer;
  return { segments, bytes, total, summaryAt, summaryBytes };
}

/** The whole text. */
export const wholeText = (text: EnvelopeText) => text.segments.join('');

/**
 * The edits that make `before`'s text into `after`'s, as the save script reads them: for each, `<offset>,<removed>,
 * <added>:` (bytes, the offset in the old text) then the added text; null when they would be about as long as the
 * whole text.
 */
export function envelopeEdits(before: EnvelopeText, after: EnvelopeText): string | null {
  const old = before.segments;
  const now = after.segments;
  const parts: string[] = [];
  let sent = 0;
  // Position `i` of the old and `j` of the new segments are aligned while their counts agree; otherwise the run
  // between the common head and tail is one edit.
  let head = 0;
  const shorter = Math.min(old.length, now.length);
  while (head < shorter && old[head] === now[head]) head += 1;
  let tail = 0;
  while (tail < shorter - head && old[old.length - 1 - tail] === now[now.length - 1 - tail]) tail += 1;
  let offset = 0;
  for (let i = 0; i < head; i++) offset += before.bytes[i]!;
  const edit = (at: number, removed: number, added: string[], addedBytes: number) => {
    parts.push(`${at},${removed},${addedBytes}:`, ...added);
    sent += addedBytes + 16;
  };
  if (old.length !== now.length) {
    let removed = 0;
    for (let i = head; i < old.length - tail; i++) removed += before.bytes[i]!;
    let addedBytes = 0;
    for (let j = head; j < now.length - tail; j++) addedBytes += after.bytes[j]!;
    edit(offset, removed, now.slice(head, now.length - tail), addedBytes);
  } else {
    const end = old.length - tail;
    let i = head;
    while (i < end) {
      if (old[i] === now[i]) {
        offset += before.bytes[i]!;
        i += 1;
        continue;
      }
      // A run of changed segments, taking in short unchanged gaps.
      const at = offset;
      let removed = 0;
      let addedBytes = 0;
      const added: string[] = [];
      let last = i;
      let j = i;
      let gapOld = 0;
      let gapNew = 0;
      const gap: string[] = [];
      while (j < end) {
        if (old[j] !== now[j]) {
          removed += gapOld + before.bytes[j]!;
          addedBytes += gapNew + after.bytes[j]!;
          added.push(...gap, now[j]!);
          gap.length = 0;
          gapOld = 0;
          gapNew = 0;
          last = j;
        } else {
          if (gapOld + before.bytes[j]! >= GAP) break;
          gapOld += before.bytes[j]!;
          gapNew += after.bytes[j]!;
          gap.push(now[j]!);
        }
        j += 1;
      }
      edit(at, removed, added, addedBytes);
      offset = at + removed;
      i = last + 1;
    }
  }
  if (sent >= after.total * 0.9) return null;
  return parts.join('');
}

/** What a save of a task left stored, as far as this process knows: the revision and the text it wrote. */
interface Saved {
  revision: number;
  text: EnvelopeText;
  state: string;
}

/**
 * The text of each task's last save by this store (up to `limit` tasks, the least recently saved forgotten first),
 * and the state it left the task in (the save script needs the index key of the state a task leaves).
 */
export class SavedTexts {
  private readonly saved = new Map<string, Saved>();
  private readonly states = new Map<string, string>();

  constructor(private readonly limit = 1024) {}

  /** The text saved at `revision`, when this store saved it. */
  at(taskId: string, revision: number): EnvelopeText | null {
    const saved = this.saved.get(taskId);
    return saved && saved.revision === revision ? saved.text : null;
  }

  /** The state the task was last seen in here (saved or read), if known. */
  state(taskId: string): string | undefined {
    return this.states.get(taskId);
  }

  remember(taskId: string, revision: number, text: EnvelopeText, state: string): void {
    this.saved.delete(taskId);
    this.saved.set(taskId, { revision, text, state });
    this.seen(taskId, state);
    if (this.saved.size > this.limit) this.saved.delete(this.saved.keys().next().value!);
  }

  /** A state read from the store (a load), for the next save's guess. */
  seen(taskId: string, state: string): void {
    this.states.delete(taskId);
    this.states.set(taskId, state);
    if (this.states.size > this.limit * 4) this.states.delete(this.states.keys().next().value!);
  }

  /** After a failed or refused save: what is stored is not known any more. */
  forget(taskId: string): void {
    this.saved.delete(taskId);
  }
}
