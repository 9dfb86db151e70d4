/**
 * Where the chart's compaction cuts the transcript (`compacting`, src/runtime/actors/summarise.ts): at a turn
 * boundary, so that a kept call always comes with its result, keeping the newest turns whole within a share of the
 * threshold. Pure: the same transcript and state give the same cut.
 */
import type { CompactionReason, CompactionState } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { entriesTokens, textTokens } from '../../machines/lib/conversationSize.js';
import { TURN_STARTS } from './compaction.js';

/** Turns kept whole at least (one after the provider refused the prompt as too long). */
export const KEEP_TURNS_AT_LEAST = 2;
/** The newest turns are kept while they fit in this share of the threshold (1 / KEEP_SHARE)... */
const KEEP_SHARE = 4;
/** ...and the facts note takes at most this share (1 / NOTE_SHARE). */
const NOTE_SHARE = 4;
/** Without a threshold, the conversation's estimate counts at least this much. */
const MIN_THRESHOLD = 400;

export interface CompactionCut {
  /** The entries before the first model output (the goal): always sent. */
  preambleEnd: number;
  /** The entries replaced by the previous summary end here (preambleEnd without one). */
  from: number;
  /** The new summary stands for the entries before this index. */
  through: number;
  /** Model turns the newly replaced entries span, and the last turn the summary covers. */
  turns: { from: number; to: number; count: number };
  throughTurn: number;
}

/** The cut for the transcript, or null when no turn is old enough to replace. */
export function compactionCut(
  transcript: readonly TranscriptEntry[],
  state: Pick<CompactionState, 'atTokens' | 'resultBytes' | 'summary' | 'tokens'>,
  reason: CompactionReason,
): CompactionCut | null {
  const starts: number[] = [];
  transcript.forEach((entry, i) => TURN_STARTS.has(entry.kind) && starts.push(i));
  const preambleEnd = starts[0] ?? transcript.length;
  const from = Math.min(transcript.length, Math.max(preambleEnd, state.summary?.throughIndex ?? preambleEnd));
  const keepAtLeast = reason === 'context_too_long' ? 1 : KEEP_TURNS_AT_LEAST;
  const room = Math.floor(effectiveThreshold(state) / KEEP_SHARE);
  let through = transcript.length;
  let kept = 0;
  let used = 0;
  for (let i = starts.length - 1; i >= 0 && starts[i]! >= from; i -= 1) {
    const cost = entriesTokens(transcript.slice(starts[i], starts[i + 1] ?? transcript.length), state.resultBytes);
    if (kept >= keepAtLeast && used + cost > room) break;
    kept += 1;
    used += cost;
    through = starts[i]!;
  }
  // Only the turns older than the kept ones are replaced: none, when every turn since the last summary is kept.
  const replaced = starts.filter((start) => start >= from && start < through).length;
  if (replaced === 0) return null;
  const turnsOf = (a: number, b: number) =>
    transcript.slice(a, b).flatMap((entry) => ('turn' in entry ? [entry.turn] : []));
  const newly = turnsOf(from, through);
  const all = turnsOf(preambleEnd, through);
  return {
    preambleEnd,
    from,
    through,
    turns: {
      from: newly.length ? Math.min(...newly) : 0,
      to: newly.length ? Math.max(...newly) : 0,
      count: replaced,
    },
    throughTurn: all.length ? Math.max(...all) : 0,
  };
}

/**
 * The threshold the cut and the note are sized by: the host's, or without one (compaction only after a provider's
 * refusal) the size of the conversation that was refused, as estimated.
 */
function effectiveThreshold(state: Pick<CompactionState, 'atTokens' | 'tokens'>): number {
  return state.atTokens ?? Math.max(MIN_THRESHOLD, state.tokens);
}

/** The characters the facts note may take. */
export function noteChars(state: Pick<CompactionState, 'atTokens' | 'tokens'>, maxChars: number): number {
  return Math.min(maxChars, Math.floor(effectiveThreshold(state) / NOTE_SHARE) * 4);
}

/** What the next turn would send, estimated: the goal, the note (if any), and the entries after `through`. */
export function sentTokens(
  transcript: readonly TranscriptEntry[],
  preambleEnd: number,
  note: string | null,
  through: number,
  resultBytes: number,
): number {
  return (
    entriesTokens(transcript.slice(0, preambleEnd), resultBytes) +
    (note === null ? 0 : textTokens(note.length)) +
    entriesTokens(transcript.slice(Math.max(preambleEnd, through)), resultBytes)
  );
}
