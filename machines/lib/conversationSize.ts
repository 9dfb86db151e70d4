/**
 * The estimated size of a conversation as the model adapters send it (characters / 4, plus a few tokens per message):
 * the same estimate src/model/compaction.ts bounds each prompt with, counted entry by entry as the chart records them,
 * so a guard can tell when the conversation nears its threshold without reading the transcript.
 */
import type { Observation } from '../context.js';
import type { TranscriptEntry } from '../journal.js';

export const CHARS_PER_TOKEN = 4;
/** Per message: role and separators. */
export const MESSAGE_OVERHEAD = 4;

export const textTokens = (chars: number): number => MESSAGE_OVERHEAD + Math.ceil(chars / CHARS_PER_TOKEN);

/** About what the adapters send for an observation (a tool message's content). */
export function observationChars(observation: Observation): number {
  if (!observation.ok) return observation.code.length + observation.summary.length + 32;
  if (observation.truncated) return String(observation.data).length + 64;
  return JSON.stringify(observation.data)?.length ?? 4;
}

/** One entry's estimated tokens; a result counts at most `resultBytes` (the adapters' cap of a tool message). */
export function entryTokens(entry: TranscriptEntry, resultBytes: number): number {
  switch (entry.kind) {
    case 'proposal':
      return textTokens(
        (entry.text?.length ?? 0) +
          entry.calls.reduce((n, call) => n + call.callId.length + call.tool.length + call.arguments.length + 24, 0),
      );
    case 'result':
      return textTokens(Math.min(observationChars(entry.observation), resultBytes));
    case 'no_answer':
      return textTokens(entry.question.length + 120);
    case 'invalid_output':
      return textTokens(entry.detail.length + 160);
    default:
      return textTokens(entry.text.length);
  }
}

/** The estimated tokens of `entries`. */
export function entriesTokens(entries: readonly TranscriptEntry[], resultBytes: number): number {
  return entries.reduce((n, entry) => n + entryTokens(entry, resultBytes), 0);
}
