/**
 * Compaction as a state of the chart: what a task knows about the size of its conversation, and the summary that
 * stands for its older turns once the chart compacted them (`compacting` in agentMachine.ts). Plain JSON, persisted.
 *
 * The transcript itself is never changed: the store and the audit keep every entry. The summary replaces the entries
 * before `throughIndex` only in what the model adapters send (src/model/compaction.ts); the structured facts (the
 * mandate, the evidence, pending and unknown calls, identifiers) are rendered each turn from the context by the host,
 * never taken from the summary.
 */
import { z } from 'zod';
import { SHORT, count, time } from './lib/schemaParts.js';

/** Who wrote a summary: the host's facts note (no model call), the host's summariser function, or the model. */
export const SUMMARISERS = ['facts', 'host', 'model'] as const;
export type Summariser = (typeof SUMMARISERS)[number];

/** At most this many characters of a summary are kept (and sent): the rest is cut, and the cut said. */
export const MAX_SUMMARY_CHARS = 6_000;

/** Why the chart compacted: the estimate passed the threshold, or the provider refused the prompt as too long. */
export const COMPACTION_REASONS = ['near_limit', 'context_too_long'] as const;
export type CompactionReason = (typeof COMPACTION_REASONS)[number];

export const compactionSummarySchema = z.strictObject({
  /** The summary's text (for `model` and `host`: untrusted text, capped and redacted), without the host's facts. */
  text: z.string().max(MAX_SUMMARY_CHARS + 64),
  source: z.enum(SUMMARISERS),
  /** Why the configured summariser's text was not used, when the facts note stands in for it (else null). */
  fallback: z.string().max(SHORT).nullable(),
  /** The transcript entries before this index are replaced by the summary in what the model is sent. */
  throughIndex: count,
  /** The last model turn the summary covers. */
  throughTurn: count,
  /** The model turn after which the chart compacted (the next turn is the first to see the summary). */
  turn: count,
  at: time,
});

export const compactionStateSchema = z.strictObject({
  /**
   * Estimated tokens (characters / 4) past which the chart compacts before the next model turn; null: it compacts
   * only after a provider's `context_too_long` (the adapters still bound each prompt themselves).
   */
  atTokens: count.nullable(),
  /** The cap of a tool result as the adapters send it, in UTF-8 bytes: a result counts at most this much. */
  resultBytes: count,
  /** Who writes the summary of the older turns. */
  summariser: z.enum(SUMMARISERS),
  /** The estimated tokens of what the next turn sends: the goal, the summary and the entries after it. */
  tokens: count,
  /** Set when the provider refused the prompt as too long (its message, capped): the chart compacts next. */
  requested: z.strictObject({ message: z.string().max(1_000) }).nullable(),
  /** The latest summary, or null while the chart never compacted. */
  summary: compactionSummarySchema.nullable(),
  /** Compactions so far (those that replaced something). */
  count: count,
  /** The model turn after which the chart last went through `compacting` (null: never): at most once per turn. */
  afterTurn: count.nullable(),
  /** A model summariser's turn reserved from the budget while `compacting` runs (null otherwise). */
  reserved: z.strictObject({ tokens: count, costMicros: count }).nullable(),
});

/** What the host sets at start (`createOrchestrator({ compaction })`); absent: no chart compaction. */
export const compactionSettingsSchema = z.strictObject({
  atTokens: count.nullable(),
  resultBytes: count,
  summariser: z.enum(SUMMARISERS),
});

export type CompactionSummary = z.infer<typeof compactionSummarySchema>;
export type CompactionState = z.infer<typeof compactionStateSchema>;
export type CompactionSettings = z.infer<typeof compactionSettingsSchema>;

/** A task stored before chart compaction, or started without it: the chart compacts only after a refusal. */
export const NO_COMPACTION: CompactionState = {
  atTokens: null,
  resultBytes: 8_192,
  summariser: 'facts',
  tokens: 0,
  requested: null,
  summary: null,
  count: 0,
  afterTurn: null,
  reserved: null,
};

export function compactionState(settings: CompactionSettings | undefined): CompactionState {
  return settings ? { ...NO_COMPACTION, ...settings } : { ...NO_COMPACTION };
}
