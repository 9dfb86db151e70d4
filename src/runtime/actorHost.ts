/** What the runtime actors need from the orchestrator. */
import type { AgentContext, Principal } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import type { Clock } from '../clock.js';
import type { AgentModel } from '../model/agentModel.js';
import type { ModelTextBus } from './modelText.js';
import type { RateLimits } from './rateLimits.js';
import type { Tracing } from './tracing.js';
import type { HostSummariser } from '../model/summariser.js';
import type { ToolRegistry } from './toolRegistry.js';

/** The live task an invoked actor belongs to. */
export interface TaskPort {
  /** True only while XState is restarting the invocations of a restored snapshot. */
  readonly restoring: boolean;
  /** The current context (read-only). */
  context(): AgentContext;
  /**
   * Resolves once the snapshot that started the caller is durably saved. Rejects if the task can no longer be
   * saved (its lease was lost or the store failed for good): the caller must not start a side effect then.
   */
  barrier(): Promise<void>;
  /** The committed transcript plus entries not yet saved. */
  transcript(): Promise<TranscriptEntry[]>;
}

export interface ActorHost {
  registry: ToolRegistry;
  model: AgentModel;
  clock: Clock;
  random: () => number;
  modelTimeoutMs: number;
  /** Backoff of model transport retries and of repeated write lookups. */
  backoff: { baseDelayMs: number; maxDelayMs: number };
  task(taskId: string): TaskPort;
  /** Per-tenant rate limits of tools, counted right before a call runs. */
  rateLimits: RateLimits;
  /** The principal as the host's session sees it now (asked right before a write), or null when it is gone. */
  refreshPrincipal?: (principal: Principal) => Promise<Principal | null> | Principal | null;
  /** Spans around model turns, tool calls and lookups (no-op by default). */
  tracing: Tracing;
  /** The host's summariser of older turns, when `compaction.summarise` is a function (see summarise.ts). */
  summariser?: HostSummariser;
  /** Where a streaming model's text goes, redacted, for live views (absent: nowhere). */
  modelText?: ModelTextBus;
}
