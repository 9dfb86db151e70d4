/**
 * The text of a model turn as it is written, for live views: from a streaming adapter (`ModelRequest.onText`) to the
 * listeners of `orchestrator.watchModelText` and the `model_text` events of a task's event stream, in this process
 * and (through the store's `liveMessages`, Redis pub/sub) in the others. Ephemeral: never persisted, journaled or
 * replayed; a listener sees what is written while it listens. The tool calls being written (`kind: 'call'`) go only
 * to listeners that ask for them, as unvetted proposals, redacted by the same rule.
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
import type { LiveMessages } from '../store/taskStore.js';

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
  /**
   * A tool call the model is writing (only to listeners that asked for calls: `watchModelText(..., { calls: true })`).
   * An unvetted proposal, never a decision: its tool may be unknown or refused, its arguments invalid, and the turn
   * may yet fail; the chart checks it only once the turn is whole, and nothing of this is persisted.
   */
  | {
      kind: 'call';
      taskId: string;
      turn: number;
      attempt: number;
      /** The call's position in the reply (0-based). */
      index: number;
      /** The call's id and tool name as written so far, redacted; null until the model wrote them. */
      callId: string | null;
      name: string | null;
      /**
       * The call's arguments (JSON text) as written, redacted as the stored arguments are and held back to the same
       * kind of boundary (also the end of a JSON string): new text to append, or with `replace` the whole so far.
       */
      text: string;
      replace: boolean;
      /** Always true: proposed, not yet checked. */
      proposed: true;
    }
  /** The attempt failed (a stream cut, a timeout): the text and calls shown for it are void; a retry may follow. */
  | { kind: 'discarded'; taskId: string; turn: number; attempt: number };

export type ModelTextListener = (event: ModelTextEvent) => void;

/** What a listener asks for: the text (always), and the calls being written (`calls: true`). */
export interface ModelTextWatchOptions {
  calls?: boolean;
}

interface Entry {
  listener: ModelTextListener;
  calls: boolean;
}

/**
 * The listeners of each task's live model text, in this process, and through `remote` (`TaskStore.liveMessages`:
 * Redis pub/sub) those of other processes: what a task driven here writes reaches a viewer connected anywhere, and
 * what a worker elsewhere writes reaches the viewers here. Only events, redacted, ever leave the process.
 */
export class ModelTextBus {
  private readonly byTask = new Map<string, Set<Entry>>();
  private readonly remoteStops = new Map<string, () => void>();
  private remote: LiveMessages | undefined;

  /** Carries the events to and from other processes (called once the store is known). */
  connect(remote: LiveMessages | undefined): void {
    this.remote = remote;
  }

  /** Calls `listener` with each event of task `taskId` until the returned function is called. */
  watch(taskId: string, listener: ModelTextListener, options: ModelTextWatchOptions = {}): () => void {
    let set = this.byTask.get(taskId);
    if (!set) {
      this.byTask.set(taskId, (set = new Set()));
      const remote = this.remote;
      if (remote) {
        this.remoteStops.set(
          taskId,
          remote.watch(taskId, (message) => {
            const event = fromRemote(taskId, message);
            if (event) this.deliver(event);
          }),
        );
      }
    }
    const entry: Entry = { listener: (event) => listener(event), calls: options.calls === true };
    set.add(entry);
    return () => {
      const current = this.byTask.get(taskId);
      if (!current?.delete(entry) || current.size > 0) return;
      this.byTask.delete(taskId);
      this.remoteStops.get(taskId)?.();
      this.remoteStops.delete(taskId);
    };
  }

  /**
   * True while someone listens to the task, here or (as last checked) in another process: otherwise nothing is
   * redacted or sent. With `calls`, someone who asked for the calls being written (elsewhere: anyone watching).
   */
  has(taskId: string, calls = false): boolean {
    // Asked first, also when someone listens here: the answer for the other processes must be ready by the first event.
    const elsewhere = this.remote?.wanted(taskId) ?? false;
    const local = this.byTask.get(taskId);
    return elsewhere || (local !== undefined && (!calls || [...local].some((entry) => entry.calls)));
  }

  emit(event: ModelTextEvent): void {
    this.deliver(event);
    if (this.remote?.wanted(event.taskId)) {
      const { taskId: _taskId, ...message } = event;
      this.remote.publish(event.taskId, message);
    }
  }

  private deliver(event: ModelTextEvent): void {
    for (const entry of [...(this.byTask.get(event.taskId) ?? [])]) {
      if (event.kind === 'call' && !entry.calls) continue;
      try {
        entry.listener(event);
      } catch {
        // A view's failure must not fail the turn; the listener loses its own event.
      }
    }
  }
}

/** An event published by another process, checked field by field (the task id is the channel's). */
function fromRemote(taskId: string, message: unknown): ModelTextEvent | null {
  if (typeof message !== 'object' || message === null) return null;
  const m = message as Record<string, unknown>;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (!count(m.turn) || !count(m.attempt)) return null;
  const base = { taskId, turn: m.turn as number, attempt: m.attempt as number };
  if (m.kind === 'discarded') return { kind: 'discarded', ...base };
  if (typeof m.text !== 'string' || typeof m.replace !== 'boolean') return null;
  if (m.kind === 'text') return { kind: 'text', ...base, text: m.text, replace: m.replace };
  const nullableText = (v: unknown) => v === null || typeof v === 'string';
  if (m.kind === 'call' && count(m.index) && nullableText(m.callId) && nullableText(m.name)) {
    return {
      kind: 'call',
      ...base,
      index: m.index as number,
      callId: m.callId as string | null,
      name: m.name as string | null,
      text: m.text,
      replace: m.replace,
      proposed: true,
    };
  }
  return null;
}

/** Where text may be shown: after a line end, or after a sentence end and the space that follows it. */
export const TEXT_BOUNDARY = /\n|[.!?](?=\s)\s?/g;

/**
 * Where a call's arguments (JSON) may be shown: as text, and also after the end of a JSON string (a quote, not
 * escaped, then `,` `:` `}` or `]`): no default redactor's match crosses a quote, and a quoted value is sealed from its
 * start to the end of the text seen so far.
 */
export const ARGUMENTS_BOUNDARY = /\n|[.!?](?=\s)\s?|(?<!\\)"\s*[,:}\]]/g;

/**
 * One attempt's text, held back to boundaries and redacted whole before it is shown (see the module comment).
 * `push` takes raw deltas from the adapter; `finish` shows the rest once the turn is done.
 */
export function textRelay(
  redact: (text: string) => string,
  send: (text: string, replace: boolean) => void,
  /** Asked before any redaction: while nobody listens, the text is only kept (a listener who comes gets it all). */
  listening: () => boolean = () => true,
  /** Global: where the text may be shown (a boundary may span a few deltas). */
  boundary: RegExp = TEXT_BOUNDARY,
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
      const from = Math.max(0, shownUpTo, raw.length - 16);
      raw += delta;
      let end = -1;
      boundary.lastIndex = from;
      for (let match = boundary.exec(raw); match; match = boundary.exec(raw)) end = match.index + match[0].length;
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
