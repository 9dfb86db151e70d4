/**
 * The host's side of the chart's compaction (`compacting`): who writes the summary of older turns, and the options a
 * host sets. The structured facts are never the summariser's to write: the host renders them from the task's context
 * (compactionFacts.ts) and sends them beside whatever summary there is.
 */
import type { TranscriptEntry } from '../../machines/journal.js';

/**
 * A host function that summarises older turns: it gets the entries newly replaced (whole turns, oldest first) and
 * what it should not repeat or may build on: the previous summary, and the host's facts. Its text is untrusted (it may
 * quote tool output): it is capped, redacted like other text, and labelled as a summary when sent. If it throws, times
 * out, or returns no text, the host's facts note is used instead, and the audit says why.
 */
export type HostSummariser = (
  older: readonly TranscriptEntry[],
  context: {
    /** The summary these entries follow (null for the first compaction). */
    previous: string | null;
    /** The host's facts, as the model will see them beside the summary. */
    facts: string;
    /** The model turns the older entries span. */
    turns: { from: number; to: number };
    signal: AbortSignal;
  },
) => Promise<string> | string;

/** `createOrchestrator({ compaction })`: when the chart compacts the conversation, and who writes the summary. */
export interface ConversationCompaction {
  /**
   * Estimated tokens (characters / 4) of the conversation past which the chart compacts before the next model turn.
   * Default: 4/5 of the model's declared `window.maxPromptTokens` (the adapters' own bound stays behind it); for a
   * model that declares none, null: the chart compacts only after the provider refuses a prompt as too long.
   */
  atTokens?: number | null;
  /**
   * Who writes the summary of older turns: `facts` (default: the host's note of what each call named and returned,
   * no model call, deterministic), `model` (the task's model is asked, with no tools, charged to the task's token and
   * cost budget like a turn), or a host function.
   */
  summarise?: 'facts' | 'model' | HostSummariser;
}
