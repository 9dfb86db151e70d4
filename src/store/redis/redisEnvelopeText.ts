/**
 * The envelope's JSON as a save sends it: whole, or as edits of the text this store saved last for the task.
 *
 * A round changes a few parts of the envelope (revision, times, summary, budget, the batch, the model's input) and
 * leaves the rest as it was (the policy, the catalog, the principal, most of the context): more than half of a read
 * round's 4 KB. A save compares its text with the one this store saved last for the task (`SavedTexts`) and sends
 * only the runs that differ, as edits of the stored text (`envelopeEdits`), which the save script splices into it.
 * What Redis keeps is the very text a whole save keeps: the stored format is unchanged.
 *
 * The script splices only onto the text the edits were made from: the task hash records which save wrote its
 * envelope (its `etag`: the writing store's id and the revision) and the text's length, and edits of another text are
 * refused before anything is written; the save then sends its text whole (`lua/save.lua`).
 */
import { AgentError } from '../../errors.js';

/** Unchanged runs shorter than this between two changed ones are sent again rather than cost an edit's header. */
const GAP = 16;
/** How many characters, from a member's start (`,"`), must agree for the old and new texts to be in step again. */
const ANCHOR = 24;
/** Members tried for getting back in step after a difference, before the rest is taken as changed. */
const TRIES = 64;

export interface EnvelopeText {
  /** `JSON.stringify(envelope)`. */
  text: string;
  /** Its length in UTF-8 bytes; equal to `text.length` when it is all ASCII. */
  bytes: number;
  /** Where the summary's JSON starts in the text (bytes), and its length. */
  summaryAt: number;
  summaryBytes: number;
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * The envelope's JSON, and where its summary is in it (the save script keeps that part as the `summary` field): found
 * by reading the text's top-level members, not by writing the summary's JSON again and searching the text for it.
 */
export function envelopeText(envelope: { taskId: string; summary: object }): EnvelopeText {
  return encodedEnvelope(envelope, false).text;
}

/**
 * `envelopeText`, and with `encode` the text's UTF-8 bytes too, as a save sends it whole: encoded once, the Buffer's
 * length is the text's byte length, not counted apart.
 */
export function encodedEnvelope(
  envelope: { taskId: string; summary: object },
  encode: boolean,
): { text: EnvelopeText; encoded: Buffer | null } {
  const text = JSON.stringify(envelope);
  const span = text === undefined ? null : summarySpan(text);
  if (span === null) {
    throw new AgentError('invalid_save', `save of task ${envelope.taskId}: the envelope's JSON has no summary object`);
  }
  const [start, end] = span;
  const encoded = encode ? Buffer.from(text, 'utf8') : null;
  const bytes = encoded === null ? utf8(text) : encoded.length;
  const ascii = bytes === text.length;
  return {
    text: {
      text,
      bytes,
      summaryAt: ascii ? start : utf8(text.slice(0, start)),
      summaryBytes: ascii ? end - start : utf8(text.slice(start, end)),
    },
    encoded,
  };
}

const COMMA = 0x2c;
const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const BACKSLASH = 0x5c;
const SUMMARY_KEY = '"summary":';

/** Where the string starting at `text[at]` (its opening quote) ends: just past its closing quote; -1 if it does not. */
function stringEnd(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === BACKSLASH) i += 1;
    else if (code === QUOTE) return i + 1;
  }
  return -1;
}

/** Where the JSON value starting at `text[at]` ends (JSON.stringify's output: no whitespace); -1 if it does not. */
function valueEnd(text: string, at: number): number {
  const first = text.charCodeAt(at);
  if (first === QUOTE) return stringEnd(text, at);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    let i = at;
    while (i < text.length) {
      const code = text.charCodeAt(i);
      if (code === COMMA || code === CLOSE_BRACE || code === CLOSE_BRACKET) break;
      i += 1;
    }
    return i > at ? i : -1;
  }
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      i = stringEnd(text, i) - 1;
      if (i < 0) return -1;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) depth += 1;
    else if ((code === CLOSE_BRACE || code === CLOSE_BRACKET) && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * Where the value of the top-level `summary` member of an object's JSON is (characters: start, end), when it is an
 * object; null otherwise. The members before it are stepped over, each read to its end (strings with their escapes,
 * nested objects and arrays to their closing bracket), so no `"summary":` inside another value is taken for it.
 */
export function summarySpan(text: string): [number, number] | null {
  if (text.charCodeAt(0) !== OPEN_BRACE) return null;
  let at = 1;
  while (at < text.length && text.charCodeAt(at) === QUOTE) {
    const keyEnd = stringEnd(text, at);
    if (keyEnd < 0 || text.charCodeAt(keyEnd) !== COLON) return null;
    const start = keyEnd + 1;
    const end = valueEnd(text, start);
    if (end < 0) return null;
    if (keyEnd - at === SUMMARY_KEY.length - 1 && text.startsWith(SUMMARY_KEY, at))
      return text.charCodeAt(start) === OPEN_BRACE ? [start, end] : null;
    if (text.charCodeAt(end) !== COMMA) return null;
    at = end + 1;
  }
  return null;
}

/** Characters compared one by one at the start of a run, and at its end once narrowed down to that many. */
const NEAR = 16;

/**
 * How many characters from `a[i]` and `b[j]` on are the same, at most `n`: the first few one by one, then blocks
 * doubling in length (substring equality is native, many times faster than a loop over characters), the block that
 * differs halved down to a few characters.
 */
function sameAhead(a: string, i: number, b: string, j: number, n: number): number {
  const first = Math.min(n, NEAR);
  let k = 0;
  while (k < first && a.charCodeAt(i + k) === b.charCodeAt(j + k)) k += 1;
  if (k < first) return k;
  let step = 4 * NEAR;
  while (k < n) {
    let m = Math.min(step, n - k);
    if (a.slice(i + k, i + k + m) === b.slice(j + k, j + k + m)) {
      k += m;
      step *= 2;
      continue;
    }
    while (m > NEAR) {
      const half = m >> 1;
      if (a.slice(i + k, i + k + half) === b.slice(j + k, j + k + half)) {
        k += half;
        m -= half;
      } else m = half;
    }
    while (a.charCodeAt(i + k) === b.charCodeAt(j + k)) k += 1;
    return k;
  }
  return k;
}

/** How many characters before `a[i]` and `b[j]` are the same, at most `n` (as `sameAhead`, backwards). */
function sameBehind(a: string, i: number, b: string, j: number, n: number): number {
  let k = 0;
  let step = 512;
  while (k < n) {
    const m = Math.min(step, n - k);
    if (a.slice(i - k - m, i - k) === b.slice(j - k - m, j - k)) k += m;
    else if (m === 1) return k;
    else step = m >> 2 || 1;
  }
  return k;
}

/** Shifts tried first, from where `a[p]` stands in `b` if the changed run kept its length. */
const SHIFTS = [0, 1, -1, 2, -2, 3, -3, 4, -4];
/** How far past that the member is looked for. */
const WINDOW = 1024;

/**
 * Where, at or after `b[j]`, the member starting at `a[p]` starts (its first `ANCHOR` characters), or -1: looked for
 * near `guess` first (most changes keep their length or nearly), then in a window ahead.
 */
function inStep(a: string, p: number, b: string, j: number, guess: number, bEnd: number): number {
  const anchor = a.slice(p, p + ANCHOR);
  for (const shift of SHIFTS) {
    const q = guess + shift;
    // Every member starts with `,"`: looked at before the whole anchor is.
    if (q < j || q + ANCHOR > bEnd || b.charCodeAt(q) !== COMMA || b.charCodeAt(q + 1) !== QUOTE) continue;
    if (b.startsWith(anchor, q)) return q;
  }
  const at = b.slice(j, Math.min(bEnd, guess + WINDOW)).indexOf(anchor);
  return at < 0 ? -1 : j + at;
}

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/**
 * The edits that make `before`'s text into `after`'s, as the save script reads them: for each, in order,
 * `<offset>,<removed>,<added>:` (bytes; the offset in the old text) then the added text; null when they would be
 * about as long as the whole text. Found in one pass: the texts are compared until they differ, then the next
 * member (`,"...`) of the old text whose first `ANCHOR` characters are found ahead in the new one puts them back in
 * step. No edit starts or ends inside a surrogate pair.
 */
export function envelopeEdits(before: EnvelopeText, after: EnvelopeText): string | null {
  const a = before.text;
  const b = after.text;
  const ascii = before.bytes === a.length && after.bytes === b.length;
  // The common head and tail bound the part that changed.
  let i = sameAhead(a, 0, b, 0, Math.min(a.length, b.length));
  if (i === a.length && i === b.length) return '';
  const tail = sameBehind(a, a.length, b, b.length, Math.min(a.length, b.length) - i);
  let aEnd = a.length - tail;
  let bEnd = b.length - tail;
  if (aEnd < a.length && isLow(a.charCodeAt(aEnd))) {
    aEnd += 1;
    bEnd += 1;
  }
  let j = i;
  const parts: string[] = [];
  let sent = 0;
  // The pending edit: a[from, to) becomes b[bFrom, bTo); `aBytes`: the byte offset of `from`.
  let from = -1;
  let to = 0;
  let bFrom = 0;
  let bTo = 0;
  // Bytes of a[0, counted), for offsets when the texts are not all ASCII.
  let counted = 0;
  let countedBytes = 0;
  const offsetOf = (at: number) => {
    if (ascii) return at;
    countedBytes += utf8(a.slice(counted, at));
    counted = at;
    return countedBytes;
  };
  const flush = () => {
    const added = b.slice(bFrom, bTo);
    const offset = offsetOf(from);
    const removed = ascii ? to - from : utf8(a.slice(from, to));
    const addedBytes = ascii ? added.length : utf8(added);
    parts.push(`${offset},${removed},${addedBytes}:`, added);
    sent += addedBytes + 12;
  };
  while (true) {
    const run = sameAhead(a, i, b, j, Math.min(aEnd - i, bEnd - j));
    i += run;
    j += run;
    if (i === aEnd && j === bEnd) break;
    if (i > 0 && isHigh(a.charCodeAt(i - 1))) {
      i -= 1;
      j -= 1;
    }
    // Back in step at the first member of the old text found ahead in the new one (else at the common tail).
    let p = i;
    let q: number;
    for (let tries = 0; ; tries++) {
      p = a.indexOf(',"', p + 1);
      if (p < 0 || p + ANCHOR > aEnd || tries >= TRIES) {
        p = aEnd;
        q = bEnd;
        break;
      }
      q = inStep(a, p, b, j, j + (p - i), bEnd);
      if (q >= 0 && q + ANCHOR <= bEnd) break;
    }
    if (from >= 0 && i - to < GAP) {
      to = p;
      bTo = q;
    } else {
      if (from >= 0) flush();
      from = i;
      to = p;
      bFrom = j;
      bTo = q;
    }
    // The member's first characters were found the same: looked at again no more.
    const same = p < aEnd ? ANCHOR : 0;
    i = p + same;
    j = q + same;
  }
  if (from >= 0) flush();
  if (sent >= after.bytes * 0.9) return null;
  return parts.join('');
}

/** What a save of a task left stored, as far as this store knows: the revision and the text it wrote. */
interface Saved {
  revision: number;
  text: EnvelopeText;
}

/** The most text bytes a store keeps of its last saves (about 4,000 envelopes of 4 KB; fewer large ones). */
export const SAVED_TEXT_BYTES = 16 * 2 ** 20;

/**
 * The text of each task's last save by this store (up to `limit` tasks and `maxBytes` bytes of text, the least
 * recently saved forgotten first; a text larger than `maxBytes` is not kept, its next save goes whole), and the state
 * each task was last seen in here (the save script is given the index key of the state a task leaves). One for the
 * whole store, shared by its buckets (a task is in one bucket).
 */
export class SavedTexts {
  private readonly saved = new Map<string, Saved>();
  private readonly states = new Map<string, string>();
  /** The bytes of the texts in `saved`. */
  private bytes = 0;

  constructor(
    private readonly limit = 1024,
    private readonly maxBytes = SAVED_TEXT_BYTES,
    /** How many tasks' last states are kept (for the save script's index keys). */
    private readonly statesLimit = 4096,
  ) {}

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
    this.forget(taskId);
    if (text.bytes <= this.maxBytes) {
      this.saved.set(taskId, { revision, text });
      this.bytes += text.bytes;
      while (this.saved.size > this.limit || this.bytes > this.maxBytes) {
        this.forget(this.saved.keys().next().value!);
      }
    }
    this.seen(taskId, state);
  }

  /** A state read from the store (a load), for the next save's guess. */
  seen(taskId: string, state: string): void {
    this.states.delete(taskId);
    this.states.set(taskId, state);
    if (this.states.size > this.statesLimit) this.states.delete(this.states.keys().next().value!);
  }

  /** After a failed or refused save: what is stored is not known any more. */
  forget(taskId: string): void {
    const saved = this.saved.get(taskId);
    if (!saved) return;
    this.saved.delete(taskId);
    this.bytes -= saved.text.bytes;
  }

  /** After an erasure that failed midway: which tasks it erased is not known, so no text is kept. */
  clear(): void {
    this.saved.clear();
    this.bytes = 0;
  }
}
