/**
 * statechart-agent: an explicit statechart agent orchestrator on XState v5. The model proposes; the host's
 * guards decide; tools run as invoked actors with timeouts, bounded read retries and idempotent writes; tasks
 * persist after every step.
 */
export {
  createOrchestrator,
  Orchestrator,
  DEFAULT_LIMITS,
  DEFAULT_POLICY,
  type AuditRecord,
  type OrchestratorOptions,
  type StartTaskRequest,
  type TaskStatus,
  type UserEventResult,
} from './orchestrator.js';
export {
  defineTool,
  toolParametersSchema,
  TransientToolError,
  type ConfirmationRule,
  type LookupContext,
  type LookupResult,
  type ReadTool,
  type RetryPolicy,
  type Tool,
  type ToolContext,
  type ToolResult,
  type ValidationContext,
  type ValidationResult,
  type WriteContext,
  type WriteTool,
} from './tool.js';
export {
  TransientModelError,
  type AgentModel,
  type ModelReply,
  type ModelRequest,
  type ModelUsageReport,
  type OfferedTool,
} from './model/agentModel.js';
export { ScriptedModel, reply, scriptedModel, type ScriptStep, type ScriptView } from './model/scriptedModel.js';
export { createOpenAIModel, ModelConfigError, type OpenAIModelOptions } from './model/openaiModel.js';
export { ModelRequestError, type ModelPrices } from './model/openaiReply.js';
export { MemoryStore } from './store/memoryStore.js';
export type { JournalStream, Lease, LeaseManager, ListQuery, SaveRequest, TaskStore } from './store/taskStore.js';
export {
  ENVELOPE_SCHEMA_VERSION,
  SUPPORTED_MACHINE_VERSIONS,
  parseEnvelope,
  type TaskEnvelope,
  type TaskState,
  type TaskSummary,
} from './store/envelope.js';
export { formatTrace, type TraceOptions } from './audit/formatTrace.js';
export { replayAudit, foldAuditEntry, type ReplayedTask } from './audit/replayAudit.js';
export { renderTraceHtml, type TraceInput } from './visualize/traceHtml.js';
// Inspection (the Stately inspector relay, offline JSON-lines and WebSocket streams) is a separate entry point,
// `statechart-agent/inspect`, so importing the library does not load @statelyai/inspect and ws.
export { gatedModel, type GatedModel } from './model/gatedModel.js';
export { ManualClock, systemClock, type Clock } from './clock.js';
export { canonicalJson } from './json/canonicalJson.js';
export { hashArguments } from './json/hashing.js';
export * from './errors.js';
export { agentMachine, AGENT_MACHINE_VERSION, type AgentMachine } from '../machines/agentMachine.js';
export type {
  AgentContext,
  BudgetLimits,
  Evidence,
  Observation,
  Outcome,
  PendingConfirmation,
  Policy,
  Principal,
  StopReason,
  SuccessCriterion,
} from '../machines/agentTypes.js';
export type { AuditEntry, TranscriptEntry } from '../machines/journal.js';
