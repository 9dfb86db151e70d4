/**
 * The model seam. A model reads the task's conversation and replies with a proposal: tool calls, an answer, a
 * question for the user, or a refusal. Its reply is untrusted: the runtime validates it into a `model.*` event
 * and the machine's gates decide what, if anything, runs.
 */
import type { Observation, Principal, Provenance } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import type { CodedError } from '../errorCodes.js';

/** A tool as offered to the model: only the ones the task's principal may use. */
export interface OfferedTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments (strict: additionalProperties false). */
  parameters: Record<string, unknown>;
  effect: 'read' | 'write';
}

export interface ModelRequest {
  taskId: string;
  /** 1-based model turn of the task. */
  turn: number;
  goal: string;
  /** Who the task acts for (for the prompt); identity is never taken back from the model. */
  principal: Readonly<Pick<Principal, 'userId' | 'tenantId'>>;
  tools: OfferedTool[];
  /** Results of the previous batch, paired by call id. */
  observations: Observation[];
  /**
   * The whole conversation, loaded on demand (real models rebuild their messages from it): what is persisted, then
   * what is not yet. Read from the store once per live task, then kept in memory: the entries are shared between
   * turns, so read them, never change them.
   */
  transcript(): Promise<TranscriptEntry[]>;
  /** Aborted on timeout or when the task is cancelled. */
  signal: AbortSignal;
  /**
   * Set when the provider answered that the prompt was too long: rebuild the conversation compacted harder (level 1:
   * half the bound, one turn kept whole). Absent: as the adapter is configured.
   */
  compaction?: { level: number };
  /**
   * Set once the chart compacted the conversation (`compacting`): send the transcript entries before `throughIndex`
   * (the goal aside) as this one host note (`text`: the summary and the host's facts), and the entries after it.
   */
  summary?: { throughIndex: number; text: string };
  /**
   * Set by the runtime when someone may watch the task live: a streaming adapter (`stream: true`) calls it with each
   * piece of the reply's text as it is generated, in order. Text only: a tool call's pieces go to `onCallText`. What
   * it receives is raw model output; the runtime redacts it before anyone sees it, and the reply still carries the
   * whole text. It must not throw.
   */
  onText?: (delta: string) => void;
  /**
   * Set with `onText`, for the live views that asked for the calls being written (`watchModelText(..., { calls: true })`):
   * a streaming adapter calls it with each piece of a tool call as it arrives: the call's position in the reply, its
   * id and name once known, and the new piece of its arguments' JSON text ('' when a piece carried only the id or
   * name). Raw, unvetted output: the runtime redacts it, marks it as a proposal, and never persists it; the reply
   * still carries the whole calls, and only they are checked and decided on. It must not throw.
   */
  onCallText?: (delta: CallTextDelta) => void;
}

/** A piece of a tool call being written, as a streaming adapter reports it (`ModelRequest.onCallText`). */
export interface CallTextDelta {
  /** The call's position among the reply's calls (0-based), in the order they began. */
  index: number;
  callId?: string;
  name?: string;
  /** New text of the call's arguments (JSON), to append to what came before. */
  arguments: string;
}

export interface ModelUsageReport {
  inputTokens: number;
  outputTokens: number;
  /** Cost of the turn in micro-units; omit to let the runtime price it (or count zero). */
  costMicros?: number;
}

export type ModelReply =
  | {
      type: 'tool_calls';
      calls: { callId?: string; name: string; arguments: string }[];
      text?: string | null;
      usage?: ModelUsageReport;
    }
  | { type: 'answer'; text: string; usage?: ModelUsageReport }
  | { type: 'ask_user'; question: string; usage?: ModelUsageReport }
  | { type: 'refusal'; reason: string; usage?: ModelUsageReport }
  /**
   * The adapter could not make sense of the response (empty, truncated, malformed). `received`: the output as the
   * model sent it, for the audit (the runtime caps and redacts it).
   */
  | { type: 'invalid'; detail: string; received?: string; usage?: ModelUsageReport };

/** What every reply may add: the model that actually answered, as the provider reported it ("gpt-4o-2024-08-06"). */
export type ModelReplyWithVersion = ModelReply & { modelVersion?: string };

export interface AgentModel {
  /** For audit and status: the configured model id ("gpt-4o", "claude-sonnet-4-5"). */
  readonly name: string;
  /** The model's version if the host pins one; otherwise each reply's `modelVersion` (as the provider reports it). */
  readonly version?: string;
  /** The version of the adapter's prompt (its system instructions), recorded with every audit entry. */
  readonly promptVersion?: string;
  /**
   * The estimated tokens the conversation may take (after the system prompt) and the cap of a tool result as sent:
   * the chart compacts the conversation before it passes this bound (`compacting`). Absent: it does so only after the
   * provider refused a prompt as too long. The shipped adapters declare theirs.
   */
  readonly window?: { maxPromptTokens: number; maxToolResultBytes: number };
  /** What one turn may spend at most; reserved from the budgets before the call starts. */
  readonly reservation?: { tokens: number; costMicros: number };
  decide(request: ModelRequest): Promise<ModelReplyWithVersion>;
}

/** Throw from `decide` for a failure worth retrying (timeout, 429, 5xx); retries spend the retry budget. */
export class TransientModelError extends Error implements CodedError<'model_transient_failure'> {
  readonly code = 'model_transient_failure' as const;
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The model and prompt a task starts with: the model's id and pinned version, and its prompt's version. */
export function modelProvenance(model: Pick<AgentModel, 'name' | 'version' | 'promptVersion'>): Provenance {
  return { model: { id: model.name, version: model.version ?? null }, prompt: model.promptVersion ?? null };
}
