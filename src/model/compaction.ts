/**
 * Context compaction: the conversation a model adapter rebuilds each turn, bounded. A pure transform of the task's
 * transcript, applied by both adapters' message builders; the persisted transcript and the audit keep everything.
 *
 * While the conversation's estimated size (characters / 4, tool results counted at most at their cap) is within
 * `maxTokens`, it is sent whole. Past it, the goal is kept, the newest turns are kept whole (at least `keepTurns`,
 * more while they fit), and every older turn is replaced by ONE host note (a user message marked "[Host note, not
 * from the user]") of the facts the host recorded from them (see compactionNote.ts): no tool output as text.
 *
 * A turn is a model output (a proposal, an answer, a question, a refusal, an unusable output) with what followed it
 * (results, the user's answer, plan progress), so a kept call always comes with its result and a result is never
 * sent without its call. Deterministic: the same transcript and options give the same messages, after a restart too.
 *
 * `level` is how hard to compact: 0 as configured; from 1 on (once the provider has answered that the prompt was too
 * long, src/runtime/actors/model.ts) only the newest turn is kept whole and each level halves the bound (and so the
 * note's room), whatever the estimate said.
 */
import type { Observation } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { compactionNote } from './compactionNote.js';
import { type HostNote, pairedResults } from './replyRules.js';

/** Turns always kept whole at level 0. */
export const KEEP_TURNS = 2;
/** The note takes at most this share of the bound (1 / NOTE_SHARE). */
const NOTE_SHARE = 4;
const CHARS_PER_TOKEN = 4;
/** Per message: role and separators. */
const MESSAGE_OVERHEAD = 4;

export interface CompactionOptions {
  /** Estimated tokens the conversation (after the system prompt) may take. */
  maxTokens: number;
  /** The cap of each tool result as sent, in UTF-8 bytes (a result counts at most this much). */
  maxToolResultBytes: number;
  /** How hard to compact: 0 as configured; 1 after the provider's `context_too_long`: one turn kept, half the bound. */
  level?: number;
  /** Newest turns kept whole at level 0 (default KEEP_TURNS); one at higher levels. */
  keepTurns?: number;
  /**
   * The chart's summary (`compacting`, src/model/compactionFacts.ts): the entries before `throughIndex` (the goal
   * aside) are sent as this one host note; what follows is bounded as above, within what the goal and note leave.
   */
  summary?: { throughIndex: number; text: string };
}

/** The conversation as the adapters render it: transcript entries, and at most one host note of compacted facts. */
export type ModelTranscript = readonly (TranscriptEntry | HostNote)[];

/** Model outputs: each starts a turn. */
export const TURN_STARTS: ReadonlySet<TranscriptEntry['kind']> = new Set([
  'proposal',
  'answer',
  'question',
  'refusal',
  'invalid_output',
]);

/** The default bound: 3/4 of the turn's prompt token bound, the rest left to the system prompt and the tools. */
export function defaultMaxPromptTokens(promptTokenBound: number): number {
  return Math.max(1, Math.floor((promptTokenBound * 3) / 4));
}

/** The transcript within `options.maxTokens` (see the module doc); unchanged when it fits or without options. */
export function compactTranscript(
  transcript: readonly TranscriptEntry[],
  options: CompactionOptions | undefined,
): ModelTranscript {
  if (!options) return transcript;
  if (options.summary) return summarised(transcript, options, options.summary);
  const level = Math.max(0, Math.min(8, Math.floor(options.level ?? 0)));
  const bound = Math.max(1, Math.floor(options.maxTokens / 2 ** level));
  const resultOf = pairedResults(transcript);
  const cost = (entry: TranscriptEntry) => entryTokens(entry, resultOf, options.maxToolResultBytes);
  const { preamble, turns } = turnsOf(transcript);
  const turnCosts = turns.map((turn) => turn.reduce((n, entry) => n + cost(entry), 0));
  const preambleCost = preamble.reduce((n, entry) => n + cost(entry), 0);
  if (level === 0 && preambleCost + turnCosts.reduce((a, b) => a + b, 0) <= bound) return transcript;

  const keepAtLeast = level === 0 ? Math.max(1, Math.floor(options.keepTurns ?? KEEP_TURNS)) : 1;
  const noteTokens = Math.floor(bound / NOTE_SHARE);
  const room = bound - preambleCost - noteTokens;
  let kept = 0;
  let used = 0;
  for (let i = turns.length - 1; i >= 0; i -= 1) {
    if (kept >= keepAtLeast && used + turnCosts[i]! > room) break;
    kept += 1;
    used += turnCosts[i]!;
  }
  // The provider said the prompt was too long, whatever the estimate says: only the newest turn is kept whole.
  if (level > 0) kept = 1;
  if (kept >= turns.length) return transcript;
  const compacted = turns.slice(0, turns.length - kept).flat();
  const note: HostNote = {
    kind: 'host_note',
    text: compactionNote(compacted, resultOf, noteTokens * CHARS_PER_TOKEN),
  };
  return [...preamble, note, ...turns.slice(turns.length - kept).flat()];
}

/** The goal, the summary as one host note, then the entries after it, bounded by what the two leave of the bound. */
function summarised(
  transcript: readonly TranscriptEntry[],
  options: CompactionOptions,
  summary: NonNullable<CompactionOptions['summary']>,
): ModelTranscript {
  const { preamble } = turnsOf(transcript);
  const through = Math.max(preamble.length, Math.min(transcript.length, Math.floor(summary.throughIndex)));
  const note: HostNote = { kind: 'host_note', text: summary.text };
  const used = estimateTokens([...preamble, note], options.maxToolResultBytes);
  const rest = compactTranscript(transcript.slice(through), {
    ...options,
    summary: undefined,
    maxTokens: Math.max(1, options.maxTokens - used),
  });
  return [...preamble, note, ...rest];
}

/** The conversation's estimated tokens as the adapters render it (characters / 4, per-message overhead added). */
export function estimateTokens(transcript: ModelTranscript, maxToolResultBytes: number): number {
  const entries = transcript.filter((e): e is TranscriptEntry => e.kind !== 'host_note');
  const resultOf = pairedResults(entries);
  return transcript.reduce(
    (n, entry) =>
      n + (entry.kind === 'host_note' ? tokens(entry.text.length) : entryTokens(entry, resultOf, maxToolResultBytes)),
    0,
  );
}

/** The entries before the first model output (the goal), then each turn's entries. */
function turnsOf(transcript: readonly TranscriptEntry[]): {
  preamble: TranscriptEntry[];
  turns: TranscriptEntry[][];
} {
  const preamble: TranscriptEntry[] = [];
  const turns: TranscriptEntry[][] = [];
  for (const entry of transcript) {
    if (TURN_STARTS.has(entry.kind)) turns.push([entry]);
    else if (turns.length === 0) preamble.push(entry);
    else turns[turns.length - 1]!.push(entry);
  }
  return { preamble, turns };
}

const tokens = (chars: number) => MESSAGE_OVERHEAD + Math.ceil(chars / CHARS_PER_TOKEN);

/** An entry's estimated tokens; a proposal counts its calls and their paired results (a result entry counts 0). */
function entryTokens(
  entry: TranscriptEntry,
  resultOf: (turn: number, call: { callId: string; tool: string }) => Observation,
  maxToolResultBytes: number,
): number {
  switch (entry.kind) {
    case 'proposal': {
      let chars = entry.text?.length ?? 0;
      let results = 0;
      for (const call of entry.calls) {
        chars += call.callId.length + call.tool.length + call.arguments.length + 24;
        results += tokens(Math.min(resultChars(resultOf(entry.turn, call)), maxToolResultBytes));
      }
      return tokens(chars) + results;
    }
    case 'result':
      return 0;
    case 'no_answer':
      return tokens(entry.question.length + 120);
    case 'invalid_output':
      return tokens(entry.detail.length + 160);
    default:
      return tokens(entry.text.length);
  }
}

/** About what toolContent (openaiMessages.ts) sends for an observation. */
function resultChars(observation: Observation): number {
  if (!observation.ok) return observation.code.length + observation.summary.length + 32;
  if (observation.truncated) return String(observation.data).length + 64;
  return JSON.stringify(observation.data)?.length ?? 4;
}
