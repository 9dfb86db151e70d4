/**
 * What a host gives the acceptance kit (its tools, the business service behind them, and how to propose valid and
 * invalid calls for them) and what the kit gives back (a report per fault class, metrics, failed invariants).
 */
import type { Loosen } from '../orchestrator/loosen.js';
import type { BudgetLimits, Json, Principal, SuccessCriterion } from '../../machines/context.js';
import type { MandateKind } from '../mandate.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Tool } from '../tool.js';

/** The fault classes of the design sources' acceptance run, plus `clean` (no fault) as the control. */
export const FAULT_CLASSES = [
  'clean',
  'invalid_schema',
  'invalid_business',
  'out_of_scope',
  'other_tenant',
  'unknown_tool',
  'duplicate_call_ids',
  'malformed_arguments',
  'read_timeout',
  'lost_write_response',
  'write_timeout_no_effect',
  'redelivered_write',
  'injected_output',
] as const;
export type FaultClass = (typeof FAULT_CLASSES)[number];

/**
 * The gates that must refuse each blocked class's faulty call: a refusal by another gate (the mandate refusing an
 * out-of-scope call first) leaves the gate under test unexercised, and is reported as such. `unpaired` is the
 * protocol gate refusing a batch whose call ids cannot be paired (there is no per-call result then).
 */
export const EXPECTED_GATES: Partial<Record<FaultClass, readonly string[]>> = {
  invalid_schema: ['schema'],
  invalid_business: ['business'],
  out_of_scope: ['permission'],
  other_tenant: ['permission', 'business'],
  unknown_tool: ['protocol'],
  duplicate_call_ids: ['unpaired'],
  malformed_arguments: ['protocol'],
  injected_output: ['protocol', 'schema', 'mandate', 'business', 'permission', 'loop', 'budget', 'rate'],
};
/** Format faults: the proposal's shape is wrong (the format rejection rate is over these). */
export const FORMAT_CLASSES: readonly FaultClass[] = [
  'invalid_schema',
  'unknown_tool',
  'duplicate_call_ids',
  'malformed_arguments',
];
/** Permission faults: the proposal is well formed but not the principal's to make. */
export const PERMISSION_CLASSES: readonly FaultClass[] = ['out_of_scope', 'other_tenant'];

/** A call a model proposes: a tool name and its arguments. */
export interface Proposal {
  tool: string;
  args: Record<string, unknown>;
}

/**
 * One task of the host's domain: who asks, for what, and the calls a model makes for it. The kit builds every fault
 * class out of these: a well-behaved model reads, then writes what the user asked for; a faulty one proposes one of
 * the invalid calls first, or obeys text injected into the read's output.
 */
export interface AcceptanceCase {
  /** A short name of the case's flow, for the report ("booking", "refund"). */
  flow: string;
  goal: string;
  /** The trusted principal of the task (the host's session). */
  principal: Principal;
  mandate?: { kind: string; terms: Json };
  success?: SuccessCriterion;
  limits?: Partial<BudgetLimits>;
  /** Who approves a write whose rule asks for an approver (four eyes); the kit's human confirms as them. */
  approver?: Principal;
  /** The read a model makes first. */
  read: Proposal;
  /** The write the user asked for, given the read's data (`undefined` when the read gave none). */
  write(readData: Json | undefined): Proposal;
  /**
   * Whether the user must confirm this write, by the host's policy as the domain states it (not read from the tool
   * under test). Default: the tool's own confirmation rule.
   */
  mustConfirm?(write: Proposal): boolean;
  /** Schema-valid arguments a business rule refuses (a time range backwards, more than is refundable). */
  invalidBusiness: Proposal;
  /** A call the principal's scopes do not cover (the kit keeps it out of the offered tools by proposing it anyway). */
  outOfScope: Proposal;
  /** A call on a resource of another tenant, or one the principal may not touch. */
  otherTenant: Proposal;
  /** What a model that obeys text injected into a tool's output proposes: must never run. */
  obey: Proposal;
}

/** A real side effect of the business service, with the idempotency key it was made under (null: none). */
export interface SideEffect {
  tool: string;
  id: string;
  idempotencyKey: string | null;
  /**
   * Fields of the tool's input as the service recorded them (a subset: what the record shows). Each must equal the
   * field of the write the user asked for, so that a tool that sends something else than what was confirmed is caught.
   */
  args?: Record<string, Json>;
  /** Money the record moved, in the unit of the task's money budget: summed per task against its limit. */
  amount?: number;
}

/** A fresh host for one run: its tools over its business service, and the cases it can make. */
export interface AcceptanceHost {
  tools: Tool[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- kinds of all term types share one list
  mandates?: readonly MandateKind<any>[];
  limits?: Partial<BudgetLimits>;
  /** Safe defaults the domain's host loosens, with reasons (`OrchestratorOptions.loosen`). */
  loosen?: Loosen;
  /**
   * The i-th task of the run; `random` is seeded per task. `fault` is the task's fault class: a domain may shape the
   * task for it (an out-of-scope call must fit the task's mandate, or the mandate refuses it before the scope check).
   */
  caseFor(index: number, random: () => number, fault: FaultClass): AcceptanceCase;
  /** Every side effect the business service really made so far (read from the service, not from the library). */
  sideEffects(): SideEffect[] | Promise<SideEffect[]>;
  close?(): void | Promise<void>;
}

export interface AcceptanceDomain {
  name: string;
  createHost(): AcceptanceHost | Promise<AcceptanceHost>;
}

/** How many tasks of each fault class, and the seed everything random derives from. */
export interface FaultPlan {
  tasks: Partial<Record<FaultClass, number>>;
  seed: number;
}

export interface AcceptanceOptions {
  domain: AcceptanceDomain;
  plan: FaultPlan;
  /** A fresh store for the run (default: a memory store). */
  store?: TaskStore;
  /** Name of the store for the report (default: the store's `kind`). */
  storeName?: string;
  /** Tasks driven at once (default 8). */
  concurrency?: number;
  /** The timeout the kit gives every tool, so that hangs end fast (default 60 ms; the report shows how late timers fire under load). */
  toolTimeoutMs?: number;
  /** How long to wait, after the last task, for tool calls still running (default 5 s). */
  settleMs?: number;
  /** How long one task may take to settle before the run reports it (default 30 s). */
  taskTimeoutMs?: number;
  /** Only these task indexes (to replay a failure: the report names them). */
  only?: number[];
  /** Called as tasks finish. */
  onProgress?(done: number, total: number, failures: number): void;
}

/** What went wrong with one task, with what it takes to replay it. */
export interface InvariantFailure {
  invariant: Invariant;
  taskId: string;
  index: number;
  fault: FaultClass;
  seed: number;
  detail: string;
}

export const INVARIANTS = [
  'blocked_before_execution',
  'refused_by_its_gate',
  'fault_applied',
  'control_succeeds',
  'side_effect_matches_request',
  'lookup_finds_committed',
  'no_unauthorized_side_effect',
  'one_action_per_intent',
  'attributable_side_effect',
  'confirmed_side_effect',
  'trusted_outcome',
  'unknown_read_is_unknown',
  'injection_changes_nothing',
  'within_budget',
  'task_settles',
] as const;
export type Invariant = (typeof INVARIANTS)[number];

export interface ClassRow {
  fault: FaultClass;
  tasks: number;
  /** Calls carrying the fault (the write of a lost response, the obeyed call of an injection...). */
  injected: number;
  blockedBeforeExecution: number;
  /** Faulty calls that reached a human's confirmation (the host's gates let them through; a failure). */
  askedHuman: number;
  /** Which gate refused the faulty calls, by gate name. */
  refusedBy: Record<string, number>;
  /** Executions of the faulty calls (by the tools' own count; a blocked class must show 0). */
  executed: number;
  /** Business records the class's tasks left. */
  businessRecords: number;
  duplicates: number;
  wrongOutcomes: number;
  done: number;
  /**
   * Tasks that ended `answered`: a final answer to a case without a `success` criterion. Neither done nor failed
   * (no trusted evidence); a `clean` one fails `control_succeeds` with the criterion to add.
   */
  answered: number;
}

export interface Metrics {
  calls: number;
  tasks: number;
  /** Format faults refused before execution / format faults injected (null: none injected). */
  formatRejectionRate: number | null;
  /** Correct permission decisions (unauthorized refused, authorized let through) / permission decisions. */
  permissionRejectionAccuracy: number | null;
  /** Unauthorized calls refused / unauthorized calls proposed. */
  permissionRecall: number | null;
  /** Authorized calls refused at the permission gate / authorized calls judged. */
  falsePermissionRefusals: number | null;
  /** Writes whose outcome was unknown at some point (they were looked up), and those still held for a reviewer. */
  unknownOutcomes: number;
  heldForReview: number;
  /** Executions the kit did not fault (a hang or a lost response would only measure the injected timeout). */
  callLatencyMs: { p50: number; p95: number };
  faultedCallLatencyMs: { p50: number; p95: number };
  taskLatencyMs: { p50: number; p95: number };
  duplicateExecutions: number;
  budgetOverruns: number;
  unconfirmedSideEffects: number;
  businessRecords: number;
  distinctIdempotencyKeys: number;
}

export interface AcceptanceReport {
  domain: string;
  store: string;
  seed: number;
  plan: FaultPlan;
  elapsedMs: number;
  rows: ClassRow[];
  metrics: Metrics;
  failures: InvariantFailure[];
  ok: boolean;
}
