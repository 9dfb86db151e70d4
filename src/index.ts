/**
 * statechart-agent: an explicit statechart agent orchestrator on XState v5. The model proposes; the host's guards
 * decide; tools run as invoked actors with timeouts, bounded read retries and idempotent writes; tasks persist
 * after every step.
 *
 * Other entries: `statechart-agent/redis` (RedisStore), `statechart-agent/openai` (an OpenAI-compatible model),
 * `statechart-agent/ai-sdk` (any Vercel AI SDK provider), `statechart-agent/inspect` (live inspection streams),
 * `statechart-agent/visualize` (the chart as pictures), `statechart-agent/fastify` (the HTTP service and its pages),
 * `statechart-agent/acceptance` (the fault-injection run), `statechart-agent/otel` (tracing), `statechart-agent/testing` (scripted model, manual clock).
 * They are apart so that importing this entry loads neither ioredis, nor a model SDK, nor Fastify, nor test doubles.
 */

// The orchestrator
export {
  Orchestrator,
  createOrchestrator,
  DEFAULT_LIMITS,
  DEFAULT_POLICY,
  type AuditRecord,
  type OrchestratorOptions,
  type OrchestratorStats,
  type RecoveryReport,
  type ReviewResolution,
  type StartTaskRequest,
  type TaskStatus,
  type UserEventResult,
  WAITING_REASONS,
  type FoundTask,
  type TaskSearch,
  type WaitingReason,
  ForkNotAllowedError,
  type ForkRefusal,
} from './orchestrator/orchestrator.js';
export { SILENT_LOGGER, type Logger, type TaskHooks, type TransitionEvent } from './orchestrator/hooks.js';
export type { Loosen, Loosened } from './orchestrator/loosen.js';
export { NO_TRACING, type TraceAttributes, type Tracing } from './runtime/tracing.js';

// Tools
export {
  defineTool,
  toolParametersSchema,
  TransientToolError,
  type ApprovalRule,
  type ConfirmationPolicy,
  type ConfirmationRule,
  type ConfirmationWaiver,
  type MandateRule,
  type MandateVerdict,
  type RateLimit,
  type LookupContext,
  type LookupResult,
  type ReadTool,
  type RetryPolicy,
  type RiskClass,
  type TaskFacts,
  type Tool,
  type ToolContext,
  type ToolResult,
  type ValidationContext,
  type ValidationResult,
  type WriteContext,
  type WriteTool,
} from './tool.js';

// Mandates: what the user asked for
export { defineMandate, type MandateKind } from './mandate.js';
// Workflows: a fixed flow with model decisions inside it
export {
  defineWorkflow,
  established,
  type WorkflowDefinition,
  type WorkflowFact,
  type WorkflowFacts,
  type WorkflowStep,
  type WorkflowTask,
} from './workflow.js';
// Sub-tasks: a tool that starts a child task with a narrower mandate, a share of the budgets and a subset of the tools
export {
  defineSubtask,
  type SubtaskBudget,
  type SubtaskDefinition,
  type SubtaskMandate,
  type SubtaskStarted,
  type SubtaskTool,
} from './subtask.js';
export type { RateLimitOptions } from './runtime/rateLimits.js';

// Models
export {
  TransientModelError,
  type AgentModel,
  type CallTextDelta,
  type ModelReply,
  type ModelRequest,
  type ModelUsageReport,
  type OfferedTool,
} from './model/agentModel.js';

// Stores
export { MemoryStore } from './store/memoryStore.js';
export { FileStore, type FileStoreOptions } from './store/file/fileStore.js';
export type {
  JournalStream,
  Lease,
  LeaseManager,
  ListQuery,
  ReadWithLease,
  SaveRequest,
  TakenTask,
  TaskStore,
} from './store/taskStore.js';
export {
  ENVELOPE_SCHEMA_VERSION,
  SUPPORTED_MACHINE_VERSIONS,
  parseEnvelope,
  type PersistedAgentSnapshot,
  type TaskEnvelope,
} from './store/envelope.js';
export { TASK_STATES, type TaskState, type TaskSummary } from './store/summary.js';
export { WAITING_TASK_STATES } from '../machines/tags.js';

// Reading what happened
export { formatTrace, type TraceOptions } from './audit/formatTrace.js';
export { type ChartMove, chartMoves, readMoves } from './audit/chartMoves.js';
export {
  atCurrentState,
  foldAuditEntry,
  replayAudit,
  type ReplayedCall,
  type ReplayedConfirmation,
  type ReplayedDecision,
  type ReplayedTask,
  type ReplayedTransition,
  type ReplayStatus,
} from './audit/replayAudit.js';
export { renderTraceHtml, type TraceInput } from './visualize/traceHtml.js';
export type { HostContext, HostFactory, HostSetup } from './cli/host.js';

// Time, hashing, errors
export { systemClock, type Clock } from './clock.js';
export { canonicalJson } from '../machines/lib/canonicalJson.js';
export { hashArguments } from './hashing.js';
export {
  AGENT_ERROR_CODES,
  AGENT_ERROR_CODE_LIST,
  isAgentErrorCode,
  type AgentErrorCode,
  type CodedError,
  type DispatchErrorCode,
  type HttpErrorCode,
  type McpErrorCode,
  type ModelErrorCode,
  type OrchestratorErrorCode,
  type RedisErrorCode,
  type StoreErrorCode,
} from './errorCodes.js';
export {
  AgentError,
  CatalogMismatchError,
  type CatalogDifference,
  CorruptTaskError,
  FencedOutError,
  HostRequestError,
  MachineError,
  MandateUsedError,
  RevisionConflictError,
  StoreUnavailableError,
  ProcessOverloadedError,
  TaskBusyError,
  TaskExistsError,
  TaskNotFoundError,
  TaskQuarantinedError,
  ToolDefinitionError,
  UnsupportedVersionError,
} from './errors.js';

// The chart and its data model
export {
  AGENT_MACHINE_VERSION,
  agentMachine,
  createAgentMachine,
  type AgentMachine,
} from '../machines/agentMachine.js';
export type { ToolRules, Toolkit } from '../machines/toolkit.js';
export { TAGS, type Tag } from '../machines/tags.js';
export {
  CALL_CODES,
  CONFIRMATION_REFUSALS,
  REPLY_CODES,
  FINAL_STATUSES,
  STOP_CODES,
  type CallCode,
  type ConfirmationRefusal,
  type ReplyCode,
  type StopCode,
} from '../machines/failures.js';
export type {
  AgentContext,
  AgentInput,
  Batch,
  BudgetCounters,
  BudgetLimits,
  BudgetState,
  CallPhase,
  CallState,
  Catalog,
  ConfirmationReason,
  ConfirmationRequirement,
  Decision,
  Effect,
  Evidence,
  Exposure,
  FinalStatus,
  GateName,
  Json,
  Mandate,
  ModelReservation,
  ModelUsage,
  Observation,
  Outage,
  Outcome,
  PendingConfirmation,
  Policy,
  Principal,
  Review,
  StopReason,
  SuccessCriterion,
  ToolFacts,
  UnverifiedRead,
} from '../machines/context.js';
export { CONFIRMATION_REASONS, RISK_CLASSES } from '../machines/context.js';
export { INPUT_LIMITS } from '../machines/limits.js';
export type { AgentEvent, HostEvent, ModelEvent, ProposedCall } from '../machines/events.js';
export type {
  AuditEntry,
  AuditKind,
  ConfirmationAction,
  HostReply,
  StartWarning,
  TranscriptEntry,
} from '../machines/journal.js';

// Sensitive values: sealed wherever they enter a task, opened only for the tools that take them
export {
  Privacy,
  displayText,
  type OmitDefaultRedactors,
  type OpenedToken,
  type PrivacyLoosening,
  type PrivacyOptions,
  type SealFailure,
  type SensitivePaths,
} from './privacy/privacy.js';
export { cardNumbers, emailAddresses, ibans, type Redactor, type RedactorGroups } from './privacy/redactors.js';
export {
  DEFAULT_REDACTOR_NAMES,
  type DefaultRedactorName,
  isCredentialKey,
  secretRedactors,
} from './privacy/secrets.js';
export { keyedSealer, memorySealer, type OpenedValue, type Sealer } from './privacy/sealer.js';
export type { AuditStamp } from '../machines/journal.js';
export type { Provenance } from '../machines/context.js';

// Erasure and retention
export { TaskErasedError, TaskRunningError } from './errors.js';
export { type MemoryStoreOptions } from './store/memoryStore.js';
export { claimsMandates, isErasable, type ErasableTaskStore, type MandateClaims } from './store/taskStore.js';
export {
  FINISHED_TASK_STATES,
  RETENTION_REASON,
  type EraseRequest,
  type RetentionOptions,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
} from './store/erasure.js';
export type { EraseTaskRequest, UserErasureReport } from './orchestrator/erasure.js';
export { DEFAULT_RETENTION_SWEEP_MS, type RetentionSweepOptions } from './orchestrator/retentionSweeper.js';

// Data loss (RedisStore's epoch marker)
export { StoreDataLostError } from './errors.js';

// Backpressure and dispatch (the queue itself: `statechart-agent/bullmq`)
export { CapacityError, EventPendingError, QueueFullError } from './errors.js';
export type { CapacityLimitName } from './errors.js';
export type {
  Dispatch,
  DispatchWorker,
  DispatchWorkerOptions,
  DriveJob,
  DriveOutcome,
  EnqueueOptions,
  QueueBacklog,
  QueueDepth,
} from './orchestrator/dispatch.js';
export type { InboxCursor, InboxReply } from './store/envelope.js';
export type { InboxEntry, LiveMessages, TaskChange, TaskChanges, TaskInbox, TaskWatch } from './store/taskStore.js';
export type { ModelTextEvent, ModelTextListener, ModelTextWatchOptions } from './runtime/modelText.js';
