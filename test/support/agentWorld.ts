/**
 * A closed world for exploring the agent machine: a fixed task (small budgets, a five-tool catalog with the host's
 * rules for each, the user's mandate), moves that depend on the current state (see `agentMoves.ts`: model outputs
 * and outages, business and authorization verdicts, the re-check before a write, tool and lookup outcomes,
 * confirmations by the user and by approvers, good and forged, reviewers, timers, cancels, restarts, tampered
 * storage), and a *shadow*: what the harness itself knows and delivered (which proposals are well-formed,
 * schema-valid and within the mandate, which scopes the principal holds, who must confirm, the hook and re-check
 * verdicts it gave, genuine confirmations and approvals, unknown and held writes, denials, outages, questions),
 * kept apart from the machine's context so the safety properties check the machine against facts it did not compute.
 *
 * A world is an ActorLogic over `{ machine, shadow }` snapshots, so `xstate/graph` can traverse it; the state
 * identity is (state value, context without the constant task fields, shadow).
 */
import { DEFAULT_PLANNING } from '../../machines/plans.js';
import { type ActorLogic, type AnyActorScope, type SnapshotFrom, createActor } from 'xstate';
import { z } from 'zod';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import { type MachineEvent, eventTime } from '../../machines/actors.js';
import type { AgentContext, AgentInput, CallState, Catalog, Json, Mandate } from '../../machines/context.js';
import type { ToolRules, Toolkit } from '../../machines/toolkit.js';
import { hashArguments, sha256Hex } from '../../src/hashing.js';
import { type Written, expectedUndos, succeededOn } from './undoWorld.js';
import { type PlanShadow, type ProposedPlan, advancePlanShadow, harnessOffer, initialPlanShadow } from './planWorld.js';
import { type HookAnswers, host, shadowVerdict, syncHook } from './syncHooks.js';
import { type CompactionShadow, advanceCompactionShadow, initialCompactionShadow } from './compactionWorld.js';

export type AgentSnapshot = SnapshotFrom<AgentMachine>;

export const T0 = 1_700_000_000_000;
export const USER = 'E17';
export const INTRUDER = 'mallory';
/** Approvers of large payments: two holding the approver scope, one who does not. */
export const APPROVER_A = 'ann';
export const APPROVER_B = 'bob';
export const NOT_APPROVER = 'carl';
export const APPROVER_SCOPE = 'payments:approve';
/** A reviewer of held writes (holds the review scope), and the review scope. */
export const REVIEWER = 'rita';
export const REVIEW_SCOPE = 'tasks:review';

// The harness's own reading of what the user asked for and of who must confirm what. The host's rules below say
// the same in their own code; the safety properties compare the machine with these constants, never with the rules.
/** The mandate: these rooms, payments of at most this amount. */
export const MANDATE_ROOMS = ['A', 'B', 'C'];
export const MANDATE_MAX_AMOUNT = 10;
/** Payments above this amount need approvers (this many, holding APPROVER_SCOPE, none the requester). */
export const APPROVAL_THRESHOLD = 6;
export const APPROVALS_NEEDED = 2;
/** Tools whose confirmation, rejected, cancels the task; tools whose confirmation, expired, cancels it. */
export const CANCELS_ON_REJECT = new Set(['send_payment']);
export const CANCELS_ON_EXPIRY = new Set(['search_rooms']);
/** What a reviewer who found that the write happened reports, per tool (it matches the tool's output schema). */
export const REVIEWED_RESULT: Record<string, Json> = {
  book_room: { bookingId: 'bk-9' },
  send_payment: { paymentId: 'pay-9' },
};

export const CATALOG: Catalog = {
  search_rooms: { effect: 'read', sameKeyRetrySafe: false },
  book_room: { effect: 'write', sameKeyRetrySafe: true },
  send_payment: { effect: 'write', sameKeyRetrySafe: false },
  close_rooms: { effect: 'write', sameKeyRetrySafe: true },
  release_room: { effect: 'write', sameKeyRetrySafe: false },
};

interface RoomTerms {
  rooms: string[];
  maxAmount: number;
}
const terms = (mandate: Readonly<Mandate>) => mandate.terms as unknown as RoomTerms;

/**
 * The host's rules of the world's tools. A read on Sundays needs confirmation (nobody deciding in time cancels the
 * task); a booking goes through business validation and a resource permission check, and must be for a room of
 * the mandate; a payment goes through business validation, must stay within the mandate's amount, moves money, and
 * always needs a confirmation: by the user up to APPROVAL_THRESHOLD, by two approvers above (a rejection cancels the
 * task); closing rooms fits any mandate but needs a scope the task's principal lacks; releasing a room is a write
 * no mandate rule covers.
 */
export const RULES: Record<string, ToolRules> = {
  search_rooms: {
    name: 'search_rooms',
    effect: 'read',
    input: z.strictObject({ day: z.string() }),
    scopes: ['rooms:read'],
    validates: false,
    authorizes: false,
    confirm: (args: { day: string }) => args.day === 'sun',
    confirmation: { onExpiry: 'cancel' },
  },
  book_room: {
    name: 'book_room',
    effect: 'write',
    input: z.strictObject({ room: z.string() }),
    output: z.strictObject({ bookingId: z.string() }),
    scopes: ['rooms:book'],
    validates: true,
    authorizes: true,
    // A written waiver: the world's booking runs unconfirmed (the payment explores the confirmations).
    confirm: { never: 'a booking for the user only, within the rooms they named' },
    mandate: (args: { room: string }, mandate) =>
      terms(mandate).rooms.includes(args.room)
        ? { ok: true }
        : { ok: false, summary: `room ${args.room} is not one the user asked for` },
  },
  send_payment: {
    name: 'send_payment',
    effect: 'write',
    input: z.strictObject({ amount: z.number() }),
    output: z.strictObject({ paymentId: z.string() }),
    scopes: ['payments:send'],
    validates: true,
    authorizes: false,
    confirm: (args: { amount: number }) =>
      args.amount > 6 ? { approverScope: 'payments:approve', approvals: 2 } : true,
    confirmation: { onReject: 'cancel' },
    mandate: (args: { amount: number }, mandate) =>
      args.amount <= terms(mandate).maxAmount
        ? { ok: true }
        : { ok: false, summary: `${args.amount} is more than the user allowed` },
    amount: (args: { amount: number }) => args.amount,
  },
  close_rooms: {
    name: 'close_rooms',
    effect: 'write',
    input: z.strictObject({}),
    scopes: ['rooms:admin'],
    validates: false,
    authorizes: false,
    mandate: () => ({ ok: true }),
  },
  release_room: {
    name: 'release_room',
    effect: 'write',
    input: z.strictObject({ room: z.string() }),
    scopes: ['rooms:book'],
    validates: false,
    authorizes: false,
  },
};

export const TOOLKIT: Toolkit = { rules: (name) => RULES[name], sha256: sha256Hex };

/** The chart under exploration, with the world's tools. */
export const CHART: AgentMachine = createAgentMachine(TOOLKIT);

/** The world's rules where a booking is undone by releasing its room (`compensation`; see `undoWorld.ts`). */
export const UNDO_RULES: Record<string, ToolRules> = {
  ...RULES,
  book_room: {
    ...RULES.book_room!,
    compensation: { tool: 'release_room', args: (a: { room: string }) => ({ room: a.room }) },
  },
};
export const UNDO_TOOLKIT: Toolkit = { rules: (name) => UNDO_RULES[name], sha256: sha256Hex };
/** The chart of the undo world. */
export const UNDO_CHART: AgentMachine = createAgentMachine(UNDO_TOOLKIT);
const UNDO_CHARTS = new WeakSet<AgentMachine>([UNDO_CHART]);

/**
 * The world's rules where the booking's hooks are synchronous (`hooks: 'sync'`): the gates' guards ask them in the
 * judging step, answering as the harness's move said (`syncHooks.ts`); the payment's validation stays asynchronous.
 */
export const SYNC_RULES: Record<string, ToolRules> = {
  ...RULES,
  book_room: { ...RULES.book_room!, validateNow: syncHook('validate'), authorizeNow: syncHook('authorize') },
};
export const SYNC_TOOLKIT: Toolkit = { rules: (name) => SYNC_RULES[name], sha256: sha256Hex };
/** The chart of the sync-hook world. */
export const SYNC_CHART: AgentMachine = createAgentMachine(SYNC_TOOLKIT);
const SYNC_CHARTS = new WeakSet<AgentMachine>([SYNC_CHART]);

/** The sync-hook world's chart with some guards replaced (a chart broken on purpose). */
export function syncChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  const chart = SYNC_CHART.provide({ guards }) as AgentMachine;
  SYNC_CHARTS.add(chart);
  return chart;
}

/** `chart` (made from a toolkit like `SYNC_TOOLKIT`) explored as the sync-hook world's (`recheckNowWorld.ts`). */
export function asSyncChart(chart: AgentMachine): AgentMachine {
  SYNC_CHARTS.add(chart);
  return chart;
}

/** The chart of the presence world: the same tools, and the harness also says the user left or came back. */
export const PRESENCE_CHART: AgentMachine = createAgentMachine(TOOLKIT);
const PRESENCE_CHARTS = new WeakSet<AgentMachine>([PRESENCE_CHART]);

/** The presence world's chart with some guards replaced (a chart broken on purpose). */
export function presenceChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  const chart = PRESENCE_CHART.provide({ guards }) as AgentMachine;
  PRESENCE_CHARTS.add(chart);
  return chart;
}

/** The chart of the plan world: the same tools; the model may propose plans (`planWorld.ts`, `planMoves.ts`). */
export const PLAN_CHART: AgentMachine = createAgentMachine(TOOLKIT);
const PLAN_CHARTS = new WeakSet<AgentMachine>([PLAN_CHART]);

/** The plan world's chart with some guards replaced (a chart broken on purpose). */
export function planChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  const chart = PLAN_CHART.provide({ guards }) as AgentMachine;
  PLAN_CHARTS.add(chart);
  return chart;
}

/** The undo world's chart with some guards replaced (a chart broken on purpose), known to the harness as undoing. */
export function undoChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  const chart = UNDO_CHART.provide({ guards }) as AgentMachine;
  UNDO_CHARTS.add(chart);
  return chart;
}

export const INPUT: AgentInput = {
  taskId: 'task-1',
  goal: 'book room A for Monday',
  principal: { userId: USER, tenantId: 'acme', scopes: ['rooms:read', 'rooms:book', 'payments:send'] },
  mandate: { kind: 'rooms', terms: { rooms: [...MANDATE_ROOMS], maxAmount: MANDATE_MAX_AMOUNT } },
  catalog: CATALOG,
  provenance: { model: { id: 'world-model', version: null }, prompt: null },
  policy: {
    version: 'policy-v1',
    maxCallsPerBatch: 2,
    maxArgumentBytes: 256,
    maxRejectedTurns: 1,
    maxInvalidOutputs: 1,
    confirmationTtlMs: 60_000,
    maxConfirmationRequests: 2,
    maxReconcileAttempts: 2,
    observationCapBytes: 512,
    onRepeatedDenial: 'stop',
    reviewScope: REVIEW_SCOPE,
    answerTtlMs: 600_000,
    onAnswerExpiry: 'replan',
    // Waits of 1 s then 2 s: the third failure in a row comes 3 s into the outage, past its 1.5 s limit.
    modelOutageMs: 1_500,
    modelWakeMs: { first: 1_000, longest: 4_000 },
    unconfirmedMoneyUpTo: 0,
    highRiskApproval: null,
    ruleOfTwo: 'confirm',
    maxUnknownReads: 2,
    compensateOn: ['failed', 'budget_exhausted', 'cancelled'],
    awayTtlMs: 86_400_000,
    planning: { ...DEFAULT_PLANNING },
    loosened: [],
  },
  limits: {
    modelTurns: 3,
    toolCalls: 3,
    writes: 1,
    retries: 2,
    tokens: 10_000,
    costMicros: 10_000,
    money: 9,
    wallClockMs: 3_600_000,
  },
  modelReservation: { tokens: 100, costMicros: 10 },
  success: { tool: 'book_room', require: ['bookingId'], description: 'a booking with an id' },
  startedAt: T0,
};

/** The task's principal as the host's session shows it at a passing re-check: refreshed, with one scope more. */
export const REFRESHED_PRINCIPAL = { ...INPUT.principal, scopes: [...INPUT.principal.scopes, 'session:refreshed'] };

// --- the shadow -------------------------------------------------------------------------------------------

/** What the harness knows of one proposed call, from its own reading of the host's rules. */
export interface CallFacts {
  callId: string;
  /** The proposal built this call to pass the schema gate. */
  schemaOk: boolean;
}

/** A hook verdict the harness delivered: `n/a` when the tool has no such hook, null while none was given yet. */
export type Verdict = 'pass' | 'reject' | 'n/a' | null;
/** The gate a refusing re-check verdict belongs to. */
export type RecheckGate = 'permission' | 'business' | 'rate';
export type RefusingGate = 'protocol' | 'schema' | 'mandate' | 'business' | 'permission' | 'rate' | 'confirmation';

export interface ShadowCall {
  callId: string;
  tool: string;
  /** The room the arguments name, if they name one (what undoing a booking releases). */
  room: string | null;
  /** The harness built this proposal to pass the protocol gate. */
  protocolOk: boolean;
  /** The tool is offered in this step by the harness's reading (in the plan world, a ready step's; else always). */
  offered: boolean;
  schemaOk: boolean;
  /** The arguments fit the user's mandate, by the harness's reading (MANDATE_*; a write no rule covers does not). */
  mandateOk: boolean;
  /** The principal holds every scope the tool requires. */
  scopeOk: boolean;
  business: Verdict;
  authorize: Verdict;
  /** The host's rule asks a human for these arguments. */
  needsConfirmation: boolean;
  /** Distinct approvers (not the requester, holding APPROVER_SCOPE) the call needs; 0: the requester confirms. */
  approvers: number;
  /** Money the call moves, by the harness's reading. */
  amount: number;
  /** Hash of the arguments as proposed (parsed), when they are a JSON object. */
  argsHash: string | null;
  /** Genuine approvals the harness delivered (right id, policy, arguments, unexpired), by confirmation id. */
  approvals: { confirmationId: string; userId: string }[];
  /**
   * A genuine confirmation the harness delivered: the requester's (right id, user, policy, unexpired, the proposed
   * arguments), or the last of enough genuine approvals of one request; `by` says who decided.
   */
  grant: { confirmationId: string; argsHash: string; by: string[] } | null;
  /** The re-check verdict the harness delivered right before the write, and the gate a refusal belongs to. */
  recheck: Verdict;
  recheckGate: RecheckGate | null;
  /** A refusing verdict the harness delivered was a check that could not answer (not a denial). */
  unanswered: boolean;
  /** The stored arguments were altered (their hash kept) while the call waited for a confirmation. */
  tampered: boolean;
  /** Executions the machine started (observed on the edges). */
  starts: number;
  /** The last write attempt ended with an unknown outcome (timeout, executor error, restart). */
  unknown: boolean;
  /** The last write attempt came back as needing review (the tool found its records inconsistent). */
  needsReview: boolean;
  /**
   * What the harness delivered that lets the write be sent again with its key: a lookup that found nothing after an
   * unknown outcome, or a reviewer's retry of a held write. Cleared when it is sent.
   */
  resend: 'lookup' | 'review' | null;
  /** A resend a reviewer asked for was refused by its re-check: the write is held again, still unsettled. */
  heldAgain: boolean;
}

/** Every gate passed by the harness's own account: protocol, schema, mandate, business, scope and resource permission. */
export function gatesOk(call: ShadowCall | undefined): boolean {
  if (!call) return false;
  const done = (v: Verdict) => v === 'pass' || v === 'n/a';
  return (
    call.protocolOk &&
    call.offered &&
    call.schemaOk &&
    call.mandateOk &&
    call.scopeOk &&
    done(call.business) &&
    done(call.authorize)
  );
}

/** The gate that must refuse the call, by the harness's account (first in gate order), or null. */
export function refusingGate(call: ShadowCall): RefusingGate | null {
  if (!call.protocolOk || !call.offered) return 'protocol';
  if (!call.schemaOk) return 'schema';
  if (!call.mandateOk) return 'mandate';
  if (call.business === 'reject') return 'business';
  if (!call.scopeOk || call.authorize === 'reject') return 'permission';
  // The re-check before a write: the arguments first (tampered ones are refused as changed), then the hooks.
  if (call.tampered) return 'confirmation';
  // (A resend a reviewer asked for, refused by its re-check, is held for review again rather than refused.)
  if (call.recheck === 'reject' && !call.heldAgain) return call.recheckGate;
  return null;
}

/** The vetting gate that must refuse the call (before it is admitted), by the harness's account, or null. */
export function vettingRefusal(call: ShadowCall): RefusingGate | null {
  const gate = refusingGate(call);
  return call.tampered || call.recheck === 'reject' ? null : gate;
}

/** The key the harness files a denial under: tool and the hash of the proposed arguments. */
export function denialKey(tool: string, argsHash: string | null): string {
  return `${tool} ${argsHash}`;
}

export interface Shadow {
  /** Harness clock: the latest `at` delivered. */
  now: number;
  calls: ShadowCall[];
  /** Calls the host refused at the permission or mandate gate (denialKey), with the gate that refused them. */
  denied: { key: string; gate: 'permission' | 'mandate' }[];
  /** The model outage the harness is making: its first and latest failure, and how many in a row. */
  outage: { since: number; lastFailureAt: number; failures: number } | null;
  /** When the model asked the question the task waits on. */
  questionAt: number | null;
  /** Outages the task waited out so far (the explorer narrows later turns after one). */
  outagesWaited: number;
  /** The task went through a batch whose later turns the explorer narrows (two writes in one batch). */
  narrowed: boolean;
  /** The policy version the host confirms under now (the task's, until the harness delivers a confirm under another). */
  hostPolicy: string;
  /** The harness delivered a cancel (one the task still runs after was deferred). */
  cancelAsked: boolean;
  /** Results of the world's read it made unknown (unavailable) in a row, since its last success. */
  unknownReads: number;
  /** The world undoes bookings on a stop (`UNDO_CHART`). */
  undoes: boolean;
  /** Bookings that succeeded, oldest first (recorded in the undo world only). */
  written: Written[];
  /** The harness also moves the user's presence (`PRESENCE_CHART`). */
  presence: boolean;
  /** The harness said the task's user left and has not said they came back (nor has their pause expired). */
  away: boolean;
  /** The plan world's reading of plans (`PLAN_CHART`), or null in the other worlds. */
  plan: PlanShadow | null;
  /** The sync-hook world (`SYNC_CHART`): the host's answers for the bookings of the batch, by call id; else null. */
  hooks: Record<string, HookAnswers> | null;
  /** A task started with chart compaction (`input.compaction`): the harness's record of it (`compactionWorld.ts`). */
  compaction: CompactionShadow | null;
}

export interface World {
  status: 'active';
  output: undefined;
  error: undefined;
  /** The chart under test: the agent machine, or a deliberately broken variant of it. */
  chart: AgentMachine;
  machine: AgentSnapshot;
  shadow: Shadow;
  /** What the machine emitted on the move that reached this world (captured in the plan world only). */
  emitted?: unknown[];
  /** The questions the synchronous hooks were asked on the move that reached this world (the sync-hook world). */
  asked?: (typeof host)['asked'];
}

export type ProtocolExpectation = 'accepted' | 'rejected' | 'unpairable';

/** One move of the harness: a machine event (or a restart), with what the harness knows about it. */
export interface Move {
  /** Readable and unique per state; also the traversal's event type. */
  type: string;
  /** Delivered to the machine; for a restart, delivered after restoring (the executor's `interrupted`). */
  event: MachineEvent | null;
  restart?: boolean;
  /** Storage tampered: the snapshot is restored with this call's stored arguments replaced (its hash kept). */
  tamper?: { callId: string; args: Json };
  /** For proposals: what the protocol gate must decide, and what the harness knows of each call. */
  protocol?: ProtocolExpectation;
  calls?: CallFacts[];
  /**
   * For a hook's verdict (or the re-check's): which gate, for which call, whether it passes, what refuses, and
   * whether a refusal is a check that could not answer (`unavailable`) rather than a decision.
   */
  check?: {
    gate: 'business' | 'permission' | 'recheck';
    callId: string;
    ok: boolean;
    refuses?: RecheckGate;
    unanswered?: boolean;
  };
  /** For a reviewer's resolution: whether the harness counts its sender as a reviewer and its result as valid. */
  review?: { reviewer: boolean; valid: boolean };
  /** For outcomes whose data claims an approval: the same outcome with neutral data. */
  benign?: MachineEvent;
  /** Human input (or a timer) that must be refused or ignored: it may not change the machine at all. */
  inert?: boolean;
  /** The explorer goes on from this move with the late alphabet (see `movesFor`). */
  narrows?: boolean;
  /** For a plan proposal (the plan world): what the harness knows of the plan. */
  plan?: ProposedPlan;
  /** For a proposal in the sync-hook world: what the booking's synchronous hooks answer for each call, by call id. */
  hooks?: Record<string, HookAnswers>;
  /** The model's turn is refused by the provider as too long (`context_too_long`). */
  tooLong?: boolean;
}

// --- reading snapshots ------------------------------------------------------------------------------------

export function valueOf(snapshot: AgentSnapshot): string {
  let value = values.get(snapshot);
  if (value === undefined) values.set(snapshot, (value = flatValue(snapshot.value)));
  return value;
}
/** Snapshots are never changed, and each is read a dozen times per move: its value is flattened once. */
const values = new WeakMap<AgentSnapshot, string>();
function flatValue(value: unknown): string {
  return typeof value === 'string'
    ? value
    : Object.entries(value as Record<string, unknown>)
        .map(([key, inner]) => `${key}.${flatValue(inner)}`)
        .join(',');
}

export const FINAL_STATES = new Set(['done', 'answered', 'failed', 'budgetExhausted', 'cancelled']);
/** States that wait for a human, a reviewer or a timer (persisted, nothing running). */
export const WAITING_STATES = new Set([
  'executing.awaitingConfirmation',
  'awaitingUser',
  'waitingForModel',
  'reviewRequired',
  'paused',
  'executing.pausedBeforeWrite',
  'awaitingPlanApproval',
]);
/** Stable states where the machine waits on one of its invoked actors, with the invoke id. */
export const INVOKING_STATES: Record<string, string> = {
  thinking: 'model',
  'vetting.validating': 'validate',
  'vetting.authorizing': 'authorize',
  'executing.rechecking.hooks': 'recheck',
  'executing.resending': 'recheck',
  'executing.reading': 'reads',
  'executing.writing': 'write',
  'executing.reconciling': 'lookup',
  compacting: 'summarise',
};
/** The states in which a call's effect runs. */
export const RUNNING_PHASES = new Set(['reading', 'writing']);

/** The context fields that change; the rest are the task's constants and are checked separately. */
export function variableContext(context: AgentContext) {
  const {
    taskId: _t,
    goal: _g,
    principal: _p,
    mandate: _d,
    catalog: _c,
    policy: _o,
    modelReservation: _m,
    success: _s,
    startedAt: _a,
    ...rest
  } = context;
  return rest;
}

/**
 * State identity for the traversal. A closed batch is kept only as its turn: once closed, no guard or step reads its
 * calls again (the next proposal replaces it, stops leave a closed batch as it is), and every closed batch was
 * checked when it was reached. Without this the graph would multiply by every past batch's details. What the
 * shadow carries across batches (denials, the outage, the question) is kept.
 */
export function serializeWorld(world: World): string {
  const known = identities.get(world);
  if (known !== undefined) return known;
  const context = variableContext(world.machine.context);
  const closed = context.batch?.closed === true;
  const { calls: _calls, ...across } = world.shadow;
  const identity = JSON.stringify([
    valueOf(world.machine),
    closed ? { ...context, batch: { turn: context.batch!.turn, closed } } : context,
    closed ? across : world.shadow,
  ]);
  identities.set(world, identity);
  return identity;
}
/** Worlds are never changed once built, so each one's identity is computed once. */
const identities = new WeakMap<World, string>();

/**
 * Whether two worlds hold the same things: the same chart and machine snapshot (the same objects), a shadow whose
 * fields are the same values, and the same other fields (arrays of the same items). A move the machine refuses
 * (refused or premature input, an early timer) leaves such a world: everything read off the world is the same,
 * its identity first, which `to` then takes from `from` rather than serializing again.
 */
export function sameWorld(from: World, to: World): boolean {
  if (from.machine !== to.machine || from.chart !== to.chart || !sameFields(from.shadow, to.shadow)) return false;
  const keys = Object.keys(to) as (keyof World)[];
  if (keys.length !== Object.keys(from).length) return false;
  for (const key of keys) {
    const [a, b] = [from[key], to[key]];
    if (a === b || key === 'shadow') continue;
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length || a.some((item, i) => item !== b[i]))
      return false;
  }
  if (identities.has(from)) identities.set(to, identities.get(from)!);
  return true;
}

/** Same keys in the same order (so the same JSON), each with the same value. */
function sameFields(a: object, b: object): boolean {
  const [ka, kb] = [Object.keys(a), Object.keys(b)];
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const key = ka[i]!;
    if (kb[i] !== key || (a as Record<string, unknown>)[key] !== (b as Record<string, unknown>)[key]) return false;
  }
  return true;
}

/**
 * Calls whose execution starts on the edge prev → next: a read run, a first write (from the re-check), or a
 * same-key resend (after a lookup found nothing, or on a reviewer's word, each re-checked in `resending`). Read off
 * the phases, whatever state the edge comes from, so a chart that starts a write from anywhere else is seen doing so.
 */
export function startedCalls(prev: AgentSnapshot, next: AgentSnapshot): CallState[] {
  const value = valueOf(next);
  if (value !== 'executing.reading' && value !== 'executing.writing') return [];
  const before = (callId: string) => prev.context.batch?.calls.find((c) => c.callId === callId);
  return (next.context.batch?.calls ?? []).filter((call) => {
    if (!RUNNING_PHASES.has(call.phase)) return false;
    const old = before(call.callId);
    return (
      !old || !RUNNING_PHASES.has(old.phase) || old.writeAttempts !== call.writeAttempts || valueOf(prev) !== value
    );
  });
}

// --- the world as actor logic -----------------------------------------------------------------------------

/**
 * Restores a snapshot the way the runtime does after a crash: persist, JSON round trip, restore (not started).
 * `tamper` alters the stored copy first, as someone with write access to the store could.
 */
export function restore(
  snapshot: AgentSnapshot,
  chart: AgentMachine = CHART,
  tamper?: (stored: { context: AgentContext }) => void,
): AgentSnapshot {
  const persisted = JSON.parse(JSON.stringify(chart.getPersistedSnapshot(snapshot)));
  tamper?.(persisted);
  return createActor(chart, { snapshot: persisted, input: INPUT }).getSnapshot();
}

/** A stored copy whose call `callId` has other arguments, with everything else (its hash, its key) as it was. */
function tampering(callId: string, args: Json) {
  return (stored: { context: AgentContext }) => {
    const call = stored.context.batch?.calls.find((c) => c.callId === callId);
    if (call) call.args = args;
  };
}

export function applyMove(world: World, move: Move, scope: AnyActorScope): World {
  const prev = world.machine;
  let next = prev;
  // The plan world reads the transcript the machine emits (the conversation's propose_plan calls and results).
  const emitted: unknown[] = [];
  const used = world.shadow.plan ? capturing(scope, emitted) : scope;
  if (move.restart) next = restore(prev, world.chart);
  if (move.tamper) next = restore(prev, world.chart, tampering(move.tamper.callId, move.tamper.args));
  // The sync-hook world: the host's answers in force are the proposal's (this move's, or the batch's), asked afresh.
  const hooks = world.shadow.hooks && (move.hooks ?? world.shadow.hooks);
  if (hooks) [host.answers, host.asked] = [hooks, []];
  if (move.event) next = world.chart.transition(next, move.event as never, used);
  const shadow = advanceShadow(world.shadow, prev, move, next);
  const plan =
    shadow.plan &&
    advancePlanShadow(shadow.plan, prev, move, next, emitted, USER, (t) => CATALOG[t]?.effect === 'write');
  const compaction = shadow.compaction && advanceCompactionShadow(shadow.compaction, prev, move, next);
  return {
    ...world,
    machine: next,
    shadow: { ...shadow, plan, hooks, compaction },
    ...(world.shadow.plan ? { emitted } : {}),
    ...(hooks ? { asked: host.asked } : {}),
  };
}

/** A scope that runs only the machine's `emit` actions, into `into` (nothing is started, nothing else runs). */
export function capturing(scope: AnyActorScope, into: unknown[]): AnyActorScope {
  return {
    ...scope,
    emit: (event: unknown) => into.push(event),
    defer: (fn: () => void) => fn(),
    actionExecutor: (action: {
      type: string;
      info: unknown;
      params: unknown;
      exec?: (i: unknown, p: unknown) => void;
    }) => {
      if (action.type === 'xstate.emit') action.exec?.(action.info, action.params);
    },
  } as unknown as AnyActorScope;
}

function parsedArgs(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The harness's reading of the mandate: which calls fit what the user asked for. */
export function fitsMandate(tool: string, args: Record<string, unknown>): boolean {
  switch (tool) {
    case 'book_room':
      return typeof args.room === 'string' && MANDATE_ROOMS.includes(args.room);
    case 'send_payment':
      return typeof args.amount === 'number' && args.amount <= MANDATE_MAX_AMOUNT;
    case 'close_rooms':
    case 'search_rooms':
      return true;
    default:
      // A write no rule relates to the mandate is outside it.
      return CATALOG[tool]?.effect === 'read';
  }
}

/** The harness's own reading of the host's rules for one proposed call. */
function shadowOf(
  callId: string,
  tool: string,
  text: string,
  protocolOk: boolean,
  facts: CallFacts | undefined,
): ShadowCall {
  const rules = RULES[tool];
  const args = parsedArgs(text);
  const object = args !== null && typeof args === 'object' && !Array.isArray(args);
  const fields = (object ? args : {}) as Record<string, unknown>;
  const schemaOk = protocolOk && facts?.schemaOk === true;
  // Read independently of the rules' own code: payments always ask (large ones the approvers), a search on Sundays.
  const payment = tool === 'send_payment' && typeof fields.amount === 'number' ? fields.amount : null;
  const needsConfirmation = schemaOk && (payment !== null || (tool === 'search_rooms' && fields.day === 'sun'));
  return {
    callId,
    tool,
    room: typeof fields.room === 'string' ? fields.room : null,
    protocolOk,
    offered: true,
    schemaOk,
    mandateOk: schemaOk && fitsMandate(tool, fields),
    scopeOk: rules !== undefined && rules.scopes.every((s) => INPUT.principal.scopes.includes(s)),
    business: rules?.validates ? null : 'n/a',
    authorize: rules?.authorizes ? null : 'n/a',
    needsConfirmation,
    approvers: schemaOk && payment !== null && payment > APPROVAL_THRESHOLD ? APPROVALS_NEEDED : 0,
    amount: payment ?? 0,
    argsHash: object ? hashArguments(args) : null,
    approvals: [],
    grant: null,
    recheck: null,
    recheckGate: null,
    unanswered: false,
    tampered: false,
    starts: 0,
    unknown: false,
    needsReview: false,
    resend: null,
    heldAgain: false,
  };
}

function advanceShadow(shadow: Shadow, prev: AgentSnapshot, move: Move, next: AgentSnapshot): Shadow {
  const event = move.event;
  const now = event ? Math.max(shadow.now, eventTime(event, shadow.now)) : shadow.now;
  let { calls, denied, outage, questionAt, outagesWaited, narrowed, hostPolicy, cancelAsked, unknownReads, written } =
    shadow;
  if (shadow.undoes) {
    const booked = succeededOn(prev, move, calls);
    if (booked && !written.some((w) => w.callId === booked.callId)) written = [...written, booked];
  }
  if (event?.type === 'xstate.done.actor.reads') {
    for (const result of event.output.results) {
      if (result.outcome.kind === 'ok') unknownReads = 0;
      else if (result.outcome.code === 'unavailable' || result.outcome.code === 'timeout') unknownReads += 1;
    }
  }
  const update = (callId: string, patch: Partial<ShadowCall>) => {
    calls = calls.map((c) => (c.callId === callId ? { ...c, ...patch } : c));
  };
  const find = (callId: string) => calls.find((c) => c.callId === callId);
  if (event?.type === 'xstate.done.actor.model') {
    const output = event.output;
    if (output.kind === 'replied') outage = null;
    else if (output.failure.transient) {
      outage = { since: outage?.since ?? output.at, lastFailureAt: output.at, failures: (outage?.failures ?? 0) + 1 };
    }
    if (output.kind === 'replied' && output.event.type === 'model.askedUser') questionAt = output.event.at;
    if (output.kind === 'replied' && output.event.type === 'model.toolsProposed' && move.protocol !== 'unpairable') {
      calls = output.event.calls.map((c) => {
        const callId = c.callId!.trim();
        return shadowOf(
          callId,
          c.name,
          c.arguments,
          move.protocol === 'accepted',
          move.calls?.find((f) => f.callId === callId),
        );
      });
      // The plan world: a tool no ready step of the plan in force names is not offered (the harness's reading).
      const offer = shadow.plan && harnessOffer(shadow.plan, prev.context);
      if (offer) calls = calls.map((c) => ({ ...c, offered: offer.has(c.tool) }));
      // The sync-hook world: a booking's verdicts are the answers its proposal came with (given in the judging step).
      const answers = shadow.hooks && move.hooks;
      if (answers)
        calls = calls.map((c) => (c.tool === 'book_room' && answers[c.callId] ? syncShadow(c, answers[c.callId]!) : c));
    }
  }
  let away = shadow.away;
  if (event && !move.inert && (event.type === 'user.left' || event.type === 'user.returned') && event.userId === USER)
    away = event.type === 'user.left';
  if (event?.type === 'timer.awayExpired' && !move.inert) away = false;
  // The machine starts undoing: its calls are the undos the harness expects (a property checks the machine's).
  if (shadow.undoes && !prev.context.unwinding && next.context.unwinding)
    calls = expectedUndos(written).map((u) => undoShadowCall(u.callId, u.tool, u.args));
  if (valueOf(next) !== 'awaitingUser') questionAt = null;
  if (move.check && event?.type.startsWith('xstate.done.actor.')) {
    const verdict = move.check.ok ? 'pass' : 'reject';
    if (!move.check.ok && move.check.unanswered) update(move.check.callId, { unanswered: true });
    if (move.check.gate === 'business') update(move.check.callId, { business: verdict });
    if (move.check.gate === 'permission') update(move.check.callId, { authorize: verdict });
    if (move.check.gate === 'recheck')
      update(move.check.callId, { recheck: verdict, recheckGate: move.check.ok ? null : (move.check.refuses ?? null) });
  }
  const pending = prev.context.pendingConfirmation;
  if (event?.type === 'user.confirmed' && pending && valueOf(prev) === 'executing.awaitingConfirmation') {
    const call = find(pending.callId);
    const valid =
      call !== undefined &&
      event.confirmationId === pending.id &&
      event.at < pending.expiresAt &&
      // Under the version the request is bound to: the task's, or the host's after a change of its policy.
      event.policyVersion === pending.policyVersion &&
      (pending.policyVersion === INPUT.policy.version || pending.policyVersion === shadow.hostPolicy) &&
      gatesOk(call) &&
      event.argsHash === call.argsHash;
    if (valid && call.approvers === 0 && event.userId === USER) {
      update(call.callId, { grant: { confirmationId: event.confirmationId, argsHash: event.argsHash, by: [USER] } });
    }
    const approver = event.userId !== USER && event.scopes.includes(APPROVER_SCOPE);
    const first = !call?.approvals.some((a) => a.confirmationId === event.confirmationId && a.userId === event.userId);
    if (valid && call.approvers > 0 && approver && first) {
      const approvals = [...call.approvals, { confirmationId: event.confirmationId, userId: event.userId }];
      const by = approvals.filter((a) => a.confirmationId === event.confirmationId).map((a) => a.userId);
      const grant =
        by.length >= call.approvers
          ? { confirmationId: event.confirmationId, argsHash: event.argsHash, by }
          : call.grant;
      update(call.callId, { approvals, grant });
    }
  }
  if (move.tamper) update(move.tamper.callId, { tampered: true });
  const writing = prev.context.batch?.calls.find((c) => c.phase === 'writing');
  if (writing && valueOf(prev) === 'executing.writing') {
    if (event?.type === 'xstate.done.actor.write') {
      update(writing.callId, {
        unknown: event.output.outcome.kind === 'unknown',
        needsReview: event.output.outcome.kind === 'review',
      });
    }
    if (event?.type === 'xstate.error.actor.write') update(writing.callId, { unknown: true });
  }
  // What lets a write be sent again, by the harness's reading: a lookup that found nothing (for a retry-safe tool,
  // with attempts and retry budget left, no cancel asked), or a reviewer's retry the harness did not deliver as inert.
  const current = prev.context.batch?.calls.find((c) => c.callId === prev.context.batch?.current);
  const { limits, used, deadlineAt } = prev.context.budget;
  if (
    current &&
    event?.type === 'xstate.done.actor.lookup' &&
    event.output.result.kind === 'not_found' &&
    valueOf(prev) === 'executing.reconciling'
  ) {
    const facts = find(current.callId);
    const permits =
      CATALOG[current.tool]?.sameKeyRetrySafe === true &&
      (facts?.starts ?? 0) < INPUT.policy.maxReconcileAttempts &&
      used.retries < limits.retries &&
      event.output.at < deadlineAt &&
      !shadow.cancelAsked;
    if (permits) update(current.callId, { resend: 'lookup' });
  }
  const held = prev.context.review;
  if (
    held &&
    move.review?.reviewer &&
    !move.inert &&
    event?.type === 'review.resolved' &&
    event.resolution === 'retry' &&
    valueOf(prev) === 'reviewRequired'
  ) {
    update(held.callId, { resend: 'review' });
  }
  if (
    current &&
    valueOf(prev) === 'executing.resending' &&
    !move.restart &&
    find(current.callId)?.resend === 'review' &&
    !(move.check?.ok ?? false)
  ) {
    update(current.callId, { heldAgain: true });
  }
  for (const call of startedCalls(prev, next)) {
    update(call.callId, {
      starts: (find(call.callId)?.starts ?? 0) + 1,
      unknown: false,
      needsReview: false,
      resend: null,
      heldAgain: false,
    });
  }
  // A call refused at the permission or mandate gate, as the harness expected it to be, is a denial to remember,
  // unless the refusal came from a check that could not answer (it may pass next time).
  const sameBatch = prev.context.batch?.turn === next.context.batch?.turn;
  for (const call of next.context.batch?.calls ?? []) {
    const was = sameBatch ? prev.context.batch?.calls.find((c) => c.callId === call.callId) : undefined;
    const facts = find(call.callId);
    const observation = call.observation;
    if (!facts || was?.observation || !observation || observation.ok) continue;
    const gate = observation.gate;
    if ((gate === 'permission' || gate === 'mandate') && refusingGate(facts) === gate && !facts.unanswered) {
      const key = denialKey(facts.tool, facts.argsHash);
      if (!denied.some((d) => d.key === key)) denied = [...denied, { key, gate }];
    }
  }
  if (valueOf(prev) === 'waitingForModel' && valueOf(next) === 'thinking') outagesWaited += 1;
  // Confirm events carry the version of the host's policy: one under another version means the host's changed.
  if (event?.type === 'user.confirmed') hostPolicy = event.policyVersion;
  if (event?.type === 'task.cancelled') cancelAsked = true;
  if (move.narrows) narrowed = true;
  return {
    now,
    calls,
    denied,
    outage,
    questionAt,
    outagesWaited,
    narrowed,
    hostPolicy,
    cancelAsked,
    unknownReads,
    undoes: shadow.undoes,
    written,
    presence: shadow.presence,
    away,
    plan: shadow.plan,
    hooks: shadow.hooks,
    compaction: shadow.compaction,
  };
}

/** A booking's shadow with the verdicts of its synchronous hooks; a refusal that could not answer is not a denial. */
function syncShadow(call: ShadowCall, answers: HookAnswers): ShadowCall {
  const validate = shadowVerdict(answers.validate);
  const authorize = shadowVerdict(answers.authorize);
  const unanswered = validate.verdict === 'reject' ? validate.unanswered : authorize.unanswered;
  return { ...call, business: validate.verdict, authorize: authorize.verdict, unanswered };
}

export function initialWorld(scope: AnyActorScope, input: AgentInput = INPUT, chart: AgentMachine = CHART): World {
  return {
    status: 'active',
    output: undefined,
    error: undefined,
    chart,
    machine: chart.getInitialSnapshot(scope, input),
    shadow: {
      now: input.startedAt,
      calls: [],
      denied: [],
      outage: null,
      questionAt: null,
      outagesWaited: 0,
      narrowed: false,
      hostPolicy: input.policy.version,
      cancelAsked: false,
      unknownReads: 0,
      undoes: UNDO_CHARTS.has(chart),
      written: [],
      presence: PRESENCE_CHARTS.has(chart),
      away: false,
      plan: PLAN_CHARTS.has(chart) ? initialPlanShadow(input.policy.planning) : null,
      hooks: SYNC_CHARTS.has(chart) ? {} : null,
      compaction: input.compaction ? initialCompactionShadow() : null,
    },
  };
}

/** The world of a task with `input` as actor logic, for `xstate/graph`. */
export function worldLogic(input: AgentInput = INPUT, chart: AgentMachine = CHART): ActorLogic<World, Move, undefined> {
  return {
    transition: (world, move, scope) => applyMove(world, move, scope as unknown as AnyActorScope),
    getInitialSnapshot: (scope) => initialWorld(scope as unknown as AnyActorScope, input, chart),
    getPersistedSnapshot: (world) => world,
  };
}

/** The same task with other limits. */
export function withLimits(limits: Partial<AgentInput['limits']>): AgentInput {
  return { ...INPUT, limits: { ...INPUT.limits, ...limits } };
}

/** The same task under another policy. */
export function withPolicy(policy: Partial<AgentInput['policy']>, input: AgentInput = INPUT): AgentInput {
  return { ...input, policy: { ...input.policy, ...policy } };
}

/**
 * The harness's reading of the rules for an undo call (`undoWorld.ts`): as for a proposal of it, except that the
 * mandate gate passes it (the compensation rule) and, declaring no confirmation rule, it asks the task's user (a
 * write's default).
 */
export function undoShadowCall(callId: string, tool: string, args: { room: string }): ShadowCall {
  const proposed = shadowOf(callId, tool, JSON.stringify(args), true, { callId, schemaOk: true });
  return { ...proposed, mandateOk: true, needsConfirmation: true };
}
