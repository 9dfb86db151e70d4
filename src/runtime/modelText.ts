/**
 * The text of a model turn as it is written, for live views: from a streaming adapter (`ModelRequest.onText`) to the
 * listeners of `orchestrator.watchModelText` and the `model_text` events of a task's event stream. Ephemeral: never
 * persisted, journaled or replayed; a listener sees what is written while it listens, in this process.
 *
 * Redaction. What a view sees must never show a value the stored text would have sealed. Redacting each delta alone
 * is not sound: a value arrives in pieces (`sk-pro` + `j-abc…`), and no piece matches a redactor. So the text is held
 * back to a boundary no match crosses: the end of a line, or of a sentence (`.`, `!` or `?` then a space). Each time
 * a boundary passes, the whole text up to it is redacted (`privacy.text`, as the stored text will be) and what is new
 * is sent. None of the default redactors' matches crosses a line end (their values end at a space, a quote or a line
 * end), and none crosses a sentence end but a quoted value or a cookie line, which are sealed from their start to
 * the end of the text seen so far. A PEM key block spans lines, and its pattern seals it from `-----BEGIN` to the
 * end of the text seen so far. When redacting more text changes what was already sent (such a block closing, a quoted
 * value ending), the whole text is sent again with `replace: true`. The residual risk is a host redactor whose
 * match spans a sentence end or a line break and whose first part does not match alone: say so in its pattern (or
 * turn streaming off).
 */

/** What a live view receives about a model turn being written. */
export type ModelTextEvent =
  | {
      kind: 'text';
      taskId: string;
      /** The task's model turn (1-based) and the attempt within it (0-based; a retry starts a new attempt). */
      turn: number;
      attempt: number;
      /** New text to append, redacted; with `replace`, the whole text so far, to show instead. */
      text: string;
      replace: boolean;
    }
  /** The attempt failed (a stream cut, a timeout): the text shown for it is void; a retry may follow. */
  | { kind: 'discarded'; taskId: string; turn: number; attempt: number };

export type ModelTextListener = (event: ModelTextEvent) => void;

/** The listeners of each task's live model text, in one process. */
export class ModelTextBus {
  private readonly byTask = new Map<string, Set<ModelTextListener>>();

  /** Calls `listener` with each event of task `taskId` until the returned function is called. */
  watch(taskId: string, listener: ModelTextListener): () => void {
    let set = this.byTask.get(taskId);
    if (!set) this.byTask.set(taskId, (set = new Set()));
    const entry: ModelTextListener = (event) => listener(event);
    set.add(entry);
    return () => {
      const current = this.byTask.get(taskId);
      if (current?.delete(entry) && current.size === 0) this.byTask.delete(taskId);
    };
  }

  /** True while someone listens to the task: otherwise nothing is redacted or sent. */
  has(taskId: string): boolean {
    return this.byTask.has(taskId);
  }

  emit(event: ModelTextEvent): void {
    for (const listener of [...(this.byTask.get(event.taskId) ?? [])]) {
      try {
        listener(event);
      } catch {
        // A view's failure must not fail the turn; the listener loses its own event.
      }
    }
  }
}

/** Where text may be shown: after a line end, or after a sentence end and the space that follows it. */
const BOUNDARY = /\n|[.!?](?=\s)\s?/g;

/**
 * One attempt's text, held back to boundaries and redacted whole before it is shown (see the module comment).
 * `push` takes raw deltas from the adapter; `finish` shows the rest once the turn is done.
 */
export function textRelay(
  redact: (text: string) => string,
  send: (text: string, replace: boolean) => void,
  /** Asked before any redaction: while nobody listens, the text is only kept (a listener who comes gets it all). */
  listening: () => boolean = () => true,
): { push(delta: string): void; finish(): void; readonly sent: boolean } {
  let raw = '';
  let shownUpTo = 0;
  let shown = '';
  const show = (end: number) => {
    if (end <= shownUpTo || !listening()) return;
    shownUpTo = end;
    const redacted = redact(raw.slice(0, end));
    if (redacted.startsWith(shown)) {
      if (redacted.length > shown.length) send(redacted.slice(shown.length), false);
    } else {
      send(redacted, true);
    }
    shown = redacted;
  };
  return {
    push(delta) {
      if (typeof delta !== 'string' || delta === '') return;
      const from = Math.max(0, raw.length - 1);
      raw += delta;
      let end = -1;
      BOUNDARY.lastIndex = from;
      for (let match = BOUNDARY.exec(raw); match; match = BOUNDARY.exec(raw)) end = match.index + match[0].length;
      // A sentence end counts once the space after it has arrived ("3.14" is no sentence end).
      if (end > 0) show(end);
    },
    finish() {
      show(raw.length);
    },
    get sent() {
      return shownUpTo > 0;
    },
  };
}
