/**
 * Every code the host makes, in one place: how a task ends (stop codes), why a call got no result or a failed one
 * (call codes, with whether the model may usefully try again), what a host event was answered (reply codes).
 * Tools add their own business codes (`conflict`, `capacity_exceeded`...); those are plain strings the host
 * passes on and never interprets.
 */

/**
 * How a task can end. `done` only ever rests on a trusted tool result that meets the task's success criterion;
 * `answered` is the honest end of a task that declared no criterion: the model gave a final answer, and the outcome
 * lists the trusted results it has, without claiming that they meet a goal.
 */
export const FINAL_STATUSES = ['done', 'answered', 'failed', 'budget_exhausted', 'cancelled'] as const;
export type FinalStatusCode = (typeof FINAL_STATUSES)[number];

/** Why a task ended. */
export const STOP_CODES = [
  'goal_met',
  /** The model answered a task that declares no success criterion: nothing is claimed beyond the evidence listed. */
  'answered_without_criterion',
  'goal_not_met',
  'could_not_verify',
  'model_refused',
  /** The model stayed unreachable (timeouts, resets, 429 and 5xx) past its retries and the outage wait. */
  'model_unavailable',
  /** The provider refused the request for a reason a retry cannot fix (a bad request, a spent quota). */
  'model_request_failed',
  /** The provider refused the key (401) or its access to the model (403). */
  'model_auth_failed',
  /** The provider does not know the model (404). */
  'model_not_found',
  /** The prompt grew longer than the model's context window. */
  'context_too_long',
  'protocol_error',
  'too_many_rejections',
  'loop_detected',
  /** A call refused at the permission gate was proposed again (policy `onRepeatedDenial: 'stop'`). */
  'permission_denied',
  /** A call refused at the mandate gate was proposed again. */
  'outside_mandate',
  /** The model's question was not answered in time (policy `onAnswerExpiry: 'stop'`). */
  'no_answer',
  'budget_exhausted',
  'cancelled',
  /** A confirmation was rejected and the tool's policy ends the task (`onReject: 'cancel'`). */
  'confirmation_rejected',
  /** Nobody confirmed in time and the tool's policy ends the task (`onExpiry: 'cancel'`). */
  'confirmation_expired',
  'internal_error',
  /** The task's user went away and did not come back within the policy's `awayTtlMs`. */
  'user_away',
  /** The model proposed more plans than the policy's `planning.maxProposals`. */
  'plan_limit',
] as const;
export type StopCode = (typeof STOP_CODES)[number];

/**
 * Codes the host gives a call's observation, with whether proposing again can help. A refusal at the business or
 * schema gate is retryable (the model can correct the arguments); a permission refusal is not.
 */
export const CALL_CODES = {
  // protocol gate, decided on the whole batch
  missing_call_id: { retryable: true },
  duplicate_call_id: { retryable: true },
  too_many_calls: { retryable: true },
  unknown_tool: { retryable: true },
  /** The tool exists but is not offered in this step of the task (the host's offer rule): propose one that is. */
  not_offered: { retryable: true },
  malformed_arguments: { retryable: true },
  duplicate_key: { retryable: true },
  arguments_too_large: { retryable: true },
  /** Not run because another call of its batch was refused. */
  batch_rejected: { retryable: false },
  // schema, business and permission gates
  invalid_arguments: { retryable: true },
  /** The arguments do not fit what the user asked for (the task's mandate): the model may correct them. */
  outside_mandate: { retryable: true },
  permission_denied: { retryable: false },
  /** The tool's per-tenant rate limit is used up for now. */
  rate_limited: { retryable: false },
  /**
   * A write whose facts could not be verified: a read it depends on ended unknown (timeout, unavailable) and has not
   * succeeded since. Reading again can help.
   */
  unverified_facts: { retryable: true },
  /** The arguments about to run differ from the ones validated and confirmed: never run. */
  arguments_changed: { retryable: false },
  /** The tool's confirmation rule failed (threw, returned a promise or something that is not a rule): never run. */
  confirmation_rule_failed: { retryable: false },
  // loop and confirmation gates
  duplicate_write: { retryable: false },
  confirmation_rejected: { retryable: false },
  confirmation_expired: { retryable: false },
  // not run because the task stopped first
  budget_exhausted: { retryable: false },
  cancelled: { retryable: false },
  loop_detected: { retryable: false },
  internal_error: { retryable: false },
  /** A write that did not take effect: looked up and not found (the task was cancelled), or so a reviewer found. */
  not_executed: { retryable: false },
  /** The tool found the business records inconsistent (an amount mismatch, a duplicate risk): a human decides. */
  needs_review: { retryable: false },
  // execution
  /** No answer in time. For a read the result is unknown, not empty; for a write the effect may exist. */
  timeout: { retryable: true },
  /** The tool (or a hook) could not be reached. */
  unavailable: { retryable: true },
  tool_error: { retryable: false },
  aborted: { retryable: false },
  /** The tool answered with data its output schema refuses: not trusted. */
  invalid_output: { retryable: false },
  /**
   * A sealed sensitive value the call needs could not be opened (a memory sealer's, after a restart; or a token of
   * another task): nothing ran.
   */
  sealed_value_unavailable: { retryable: false },
  /** The process stopped while a write was in flight. */
  interrupted: { retryable: false },
  /** A write whose effect could not be established, even by lookup. */
  outcome_unknown: { retryable: false },
  lookup_failed: { retryable: false },
  // sub-tasks (a call of a host's sub-task tool)
  /** The child would use a tool this task may not use (or a sub-task tool: one level only). */
  subtask_tools_not_permitted: { retryable: false },
  /** The child's mandate would not be narrower than this task's. */
  subtask_mandate_not_narrower: { retryable: true },
  /** The child task ended without meeting its goal (failed, out of budget, cancelled): its reason is in the summary. */
  subtask_failed: { retryable: false },
  // the plan gate (a call of the host's propose_plan)
  /** The task takes no plans (`planning.mode: 'off'`). */
  planning_off: { retryable: false },
  plan_malformed: { retryable: true },
  /** A plan is in force and can go on: it is not replaced. */
  plan_in_force: { retryable: false },
  /** The steps depend on each other in a cycle. */
  plan_cycle: { retryable: true },
  /** A write step's tool declares no rule against the task's mandate. */
  mandate_unchecked: { retryable: true },
  /** The plan's estimated cost is more than the task has left. */
  over_budget: { retryable: true },
  plan_rejected: { retryable: false },
  plan_expired: { retryable: false },
  plan_limit: { retryable: false },
  /** A workflow's decision outside the step's choices or schema (or none asked for): decide again. */
  invalid_decision: { retryable: true },
} as const satisfies Record<string, { retryable: boolean }>;

export type CallCode = keyof typeof CALL_CODES;

/** The default retryability of a host call code; business codes of tools are retryable (the model can adjust). */
export function isRetryable(code: string): boolean {
  return Object.hasOwn(CALL_CODES, code) ? CALL_CODES[code as CallCode].retryable : true;
}

/** A write attempt that ended with one of these may have taken effect: it is looked up before anything else. */
export const WRITE_OUTCOME_UNKNOWN: ReadonlySet<string> = new Set<CallCode>([
  'timeout',
  'unavailable',
  'tool_error',
  'invalid_output',
  'aborted',
  'interrupted',
]);

/** Observations with these codes say "we do not know", never "there is none": nothing can be verified from them. */
export const UNVERIFIED: ReadonlySet<string> = new Set<CallCode>([
  'timeout',
  'unavailable',
  'outcome_unknown',
  'lookup_failed',
]);

/** Why a `user.confirmed` event does not satisfy the pending confirmation, in the order the chart checks. */
export const CONFIRMATION_REFUSALS = {
  unknown_confirmation: 'no pending confirmation has this id',
  wrong_user: 'this confirmation can only be given by the user it was asked of',
  confirmation_expired: 'the confirmation expired before it was given; it is asked again',
  policy_changed: 'the host policy changed since the confirmation was asked; it is asked again',
  arguments_changed:
    'the confirmed arguments differ from the arguments this request is for; reload it and decide again',
  self_approval: 'the requester cannot approve their own request; another person holding the approver scope must',
  missing_approver_scope: 'the deciding session lacks the approver scope this confirmation needs',
  already_approved: 'this approver already approved; another approver must decide',
} as const;
export type ConfirmationRefusal = keyof typeof CONFIRMATION_REFUSALS;

/** Codes of the chart's answer to a host event beyond a confirmation's refusals, and of the host's refusals before the event reaches the chart. */
export const HOST_REPLY_CODES = [
  'confirmation_rejected',
  'not_waiting_for_confirmation',
  'not_waiting_for_answer',
  'nothing_due',
  'cancel_deferred',
  'question_expired',
  'approval_recorded',
  'not_waiting_for_review',
  'not_a_reviewer',
  'invalid_review',
  'review_pending',
  'wrong_tenant',
  'task_finished',
  'permission_denied',
  /** `user.returned` for a task that was not paused or marked away. */
  'not_away',
  /** An early model retry for a task that is not waiting for the model. */
  'not_waiting_for_model',
  /** An action only an operator of the task's tenant may take. */
  'operator_only',
  /** An action the task's budgets cannot pay for (an early model retry: one retry and the turn's reservation). */
  'budget_exhausted',
] as const;

/** Codes of the chart's answer to a host event, and of the host's refusals before the event reaches the chart. */
export type ReplyCode = ConfirmationRefusal | (typeof HOST_REPLY_CODES)[number];

/** Every `ReplyCode`, at run time. */
export const REPLY_CODES: readonly ReplyCode[] = [
  ...(Object.keys(CONFIRMATION_REFUSALS) as ConfirmationRefusal[]),
  ...HOST_REPLY_CODES,
];

/**
 * Why a model turn produced no event: the provider stayed unreachable past the retries (`model_unavailable`), or it
 * refused the request, for a reason the code names (the shared provider taxonomy, src/model/providerErrors.ts).
 */
export const MODEL_FAILURE_CODES = [
  'model_unavailable',
  'model_request_failed',
  'model_auth_failed',
  'model_not_found',
  'context_too_long',
] as const satisfies readonly StopCode[];
export type ModelFailureCode = (typeof MODEL_FAILURE_CODES)[number];
