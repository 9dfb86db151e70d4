/**
 * Every code an error of this package carries, in one closed list grouped by the entry that throws it, so that
 * `switch (error.code)` on an `AgentError` is checked for exhaustiveness and a client can tell the codes apart at run
 * time (`isAgentErrorCode`). A code is never renamed once shipped: HTTP clients and hosts match on it.
 *
 * The groups may share a code (the HTTP layer answers `task_not_found` as the orchestrator does); the union is
 * their sum. Codes of a task's outcome (stop, call and reply codes) are data, not errors: see `machines/failures.ts`.
 * The one exception is the HTTP layer, which answers a refused decision with the chart's reply code.
 */
import { REPLY_CODES, type ReplyCode } from '../machines/failures.js';

export const AGENT_ERROR_CODES = {
  /** The orchestrator (the package root): requests, tasks, tools, privacy, capacity. */
  orchestrator: [
    'invalid_request',
    'invalid_event',
    'task_not_found',
    'task_erased',
    'task_exists',
    'task_busy',
    'task_quarantined',
    'task_running',
    'task_stopped',
    'task_not_live',
    'catalog_mismatch',
    'mandate_used',
    /** `ForkNotAllowedError`: `orchestrator.fork` refused (its `reason`: mandate, subtask, workflow, step...). */
    'fork_not_allowed',
    'invalid_mandate_kind',
    'machine_error',
    'invalid_tool_definition',
    'duplicate_tool',
    'invalid_workflow',
    'overloaded',
    'tenant_at_capacity',
    'orchestrator_closed',
    'orchestrator_draining',
    'erasure_unsupported',
    'invalid_sealer_key',
    'invalid_redactor',
    'invalid_privacy_options',
    'missing_peer',
    'internal_error',
    /** `TimeoutError`: a step of the runtime ran past its time (caught inside; becomes an outcome code). */
    'timed_out',
    /** `TransientToolError`, thrown by a tool: it could not be reached; the call ends `unavailable`. */
    'tool_unavailable',
  ],
  /** Every store (memory, file, redis): reads, saves, leases. */
  store: [
    'revision_conflict',
    'fenced_out',
    'corrupt_task',
    'unsupported_version',
    'store_unavailable',
    /** `ProcessOverloadedError`: a store command timed out because this process's event loop was blocked. */
    'process_overloaded',
    'invalid_save',
    'lock_timeout',
  ],
  /** `statechart-agent/redis`. */
  redis: ['store_data_lost', 'store_layout_mismatch', 'invalid_lease_ttl'],
  /** Dispatch to workers (`statechart-agent/bullmq` and the orchestrator's dispatched mode). */
  dispatch: ['queue_full', 'event_pending', 'task_handed_back', 'settle_timeout', 'start_failed'],
  /** `statechart-agent/openai` and `statechart-agent/ai-sdk`, and `TransientModelError` a host's model throws. */
  models: [
    'model_request_failed',
    'model_not_configured',
    'model_request_aborted',
    'model_transient_failure',
    /** The provider refused the key (401) or its access to the model (403). */
    'model_auth_failed',
    /** The provider does not know the model (404, or code `model_not_found`). */
    'model_not_found',
    /** The prompt is longer than the model's context window. */
    'context_too_long',
  ],
  /** `statechart-agent/mcp`. */
  mcp: ['invalid_mcp_policy', 'mcp_connection_failed', 'mcp_lookup_unavailable'],
  /** `statechart-agent/inspect`. */
  inspect: ['inspector_start_failed'],
  /** `statechart-agent/testing`. */
  testing: ['script_exhausted'],
  /** The command-line tools. */
  cli: ['usage', 'invalid_host', 'invalid_option'],
  /**
   * `statechart-agent/fastify`: the codes its error bodies carry beside the orchestrator's (which pass through), and
   * the chart's reply code of a refused decision.
   */
  http: [
    'invalid_request',
    'invalid_query',
    'invalid_last_event_id',
    'invalid_json',
    /** A body with a key that could poison a prototype (`__proto__`, `constructor.prototype`): valid JSON, refused. */
    'forbidden_json_key',
    'body_too_large',
    'unsupported_media_type',
    'unauthenticated',
    'invalid_principal',
    'cross_origin',
    'csrf_token_invalid',
    'caller_cannot_set_rules',
    'start_request_invalid',
    'start_request_principal_mismatch',
    'invalid_service_options',
    'task_not_found',
    'task_exists',
    'not_found',
    /** `problemFrameworkErrors`: a path with a malformed percent-escape (400), a path parameter too long (414). */
    'invalid_url_encoding',
    'path_param_too_long',
    'unknown_event_id',
    'not_taken',
    'not_stepping',
    'model_not_waiting',
    /** Over the service's HTTP rate limit (429, with Retry-After). */
    'rate_limited',
    /** An operator's route (history of another's task, resolve a review, erase) asked by someone who is none. */
    'operator_only',
    'fork_not_allowed',
    /** The erase route passes these on from `orchestrator.erase`. */
    'task_running',
    'task_busy',
    'erasure_unsupported',
    'internal_error',
    ...REPLY_CODES,
  ],
} as const satisfies Record<string, readonly string[]>;

type Groups = typeof AGENT_ERROR_CODES;
type CodesOf<G extends keyof Groups> = Groups[G] extends readonly (infer C)[] ? C : never;

/** The code of an error this package throws. */
export type AgentErrorCode = CodesOf<keyof Groups>;
export type OrchestratorErrorCode = CodesOf<'orchestrator'>;
export type StoreErrorCode = CodesOf<'store'>;
export type RedisErrorCode = CodesOf<'redis'>;
export type DispatchErrorCode = CodesOf<'dispatch'>;
export type ModelErrorCode = CodesOf<'models'>;
export type McpErrorCode = CodesOf<'mcp'>;
/** The codes the HTTP layer itself answers with (`ServiceError`), the chart's reply codes among them. */
export type HttpErrorCode = CodesOf<'http'> | ReplyCode;

/** Every code once, at run time. */
export const AGENT_ERROR_CODE_LIST: readonly AgentErrorCode[] = [
  ...new Set(Object.values(AGENT_ERROR_CODES).flat()),
] as AgentErrorCode[];

const KNOWN: ReadonlySet<string> = new Set(AGENT_ERROR_CODE_LIST);

/** True when `code` is one of this package's error codes. */
export function isAgentErrorCode(code: unknown): code is AgentErrorCode {
  return typeof code === 'string' && KNOWN.has(code);
}

/**
 * What every error of this package has: a stable code from `AgentErrorCode`. `AgentError` is the base class of the
 * errors thrown at the API edge; the few signals thrown *into* the runtime (a tool's `TransientToolError`, a model's
 * `TransientModelError`) and caught inside it (`TimeoutError`) carry a code too, without being AgentErrors.
 */
export interface CodedError<C extends AgentErrorCode = AgentErrorCode> extends Error {
  readonly code: C;
}
