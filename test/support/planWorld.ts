/**
 * Plans in the adversarial world, by the harness's own reading (plan-and-execute, `PLAN_CHART`). The harness knows
 * the plans it has the model propose (their steps, tools, dependencies and hash, computed here, not by the machine),
 * decides by its own reading what the plan gate must do with each, who approved which plan, and which tool results it
 * delivered for which call. It also keeps the model's conversation ledger of `propose_plan` calls from what the
 * machine emitted. `planProperties.ts` compares the machine with this reading.
 *
 * Structural views only, so this module does not import `agentWorld.ts` (which imports it).
 */
import type { MachineEvent } from '../../machines/actors.js';
import type { AgentContext } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { PLAN_TOOL, type PlanningPolicy } from '../../machines/plans.js';
import { hashArguments } from '../../src/hashing.js';

interface SnapshotView {
  value: unknown;
  context: AgentContext;
}
interface MoveView {
  event: MachineEvent | null;
  inert?: boolean;
  restart?: boolean;
  plan?: ProposedPlan;
  review?: { reviewer: boolean; valid: boolean };
}

/** A step as the harness has the model write it. */
export interface HarnessStep {
  id: string;
  tool: string;
  purpose: string;
  depends_on: string[];
}

/** What the harness knows of a plan it has the model propose, and what the plan gate must make of it. */
export interface ProposedPlan {
  label: string;
  callId: string;
  /** The arguments as the model sends them. */
  arguments: string;
  /** The steps, when the arguments are a well-formed, acyclic plan of installed tools; else why the gate refuses. */
  steps: HarnessStep[] | null;
  refusal: 'plan_malformed' | 'plan_cycle' | 'unknown_tool' | null;
}

/** A plan the harness counts as awaiting approval or in force: its hash and steps by the harness's reading. */
export interface HarnessPlan {
  callId: string;
  hash: string;
  steps: { id: string; tool: string; write: boolean; dependsOn: string[] }[];
}

/** A tool result the harness delivered in the current batch: trusted ok, the tool's own failure, or unknown. */
export type Delivered = { callId: string; tool: string; outcome: 'ok' | 'error' | 'not_done' | 'unknown' };

export interface PlanShadow {
  policy: PlanningPolicy;
  /** Plans the machine took from the model (refused ones included; not the one past the limit). */
  proposals: number;
  /** The plan waiting for approval, by the harness's reading, or null. */
  awaiting: HarnessPlan | null;
  /** The plan in force (adopted without approval, or approved genuinely), or null. */
  adopted: HarnessPlan | null;
  /** Tool results the harness delivered since the last proposal (plan or calls). */
  delivered: Delivered[];
  /** `propose_plan` calls the model's conversation holds without a result yet. */
  open: string[];
  /** Ledger problems seen on the last edge (a result for no open call, twice, or a proposal twice). */
  ledger: string[];
}

export function initialPlanShadow(policy: PlanningPolicy): PlanShadow {
  return { policy, proposals: 0, awaiting: null, adopted: null, delivered: [], open: [], ledger: [] };
}

/** `sha256:` of a plan as the approver sees it (id, tool, purpose, dependencies), computed by the harness. */
export function harnessPlanHash(steps: readonly HarnessStep[]): string {
  return hashArguments(
    steps.map((s) => ({ id: s.id, tool: s.tool, purpose: s.purpose, depends_on: [...new Set(s.depends_on)] })),
  );
}

const stateOf = (snapshot: SnapshotView) => JSON.stringify(snapshot.value);

/** What the plan gate must do with `plan`, by the harness's reading of the policy and what is left of the budget. */
export function expectedGate(
  shadow: PlanShadow,
  prev: SnapshotView,
  plan: ProposedPlan,
  writes: (tool: string) => boolean,
): 'limit' | 'in_force' | 'refused' | 'awaiting' | 'adopted' {
  if (shadow.proposals >= shadow.policy.maxProposals) return 'limit';
  // A plan in force that can go on is not replaced: a step of it must have failed, or none be able to run.
  const current = prev.context.plan?.current;
  if (current?.status === 'adopted') {
    const done = new Set([
      ...(prev.context.plan?.earlier ?? []).map((s) => s.id),
      ...current.steps.filter((s) => s.status === 'succeeded').map((s) => s.id),
    ]);
    const pending = current.steps.filter((s) => s.status === 'pending');
    const ready = pending.some((s) => s.dependsOn.every((d) => done.has(d)));
    const failed = current.steps.some((s) => s.status === 'failed');
    if (!failed && (pending.length === 0 || ready)) return 'in_force';
  }
  if (plan.steps === null) return 'refused';
  // A re-plan may not reuse the id of a step that succeeded (it stays a fact); the statuses are checked by P9.
  const planning = prev.context.plan;
  const taken = new Set([
    ...(planning?.earlier ?? []).map((s) => s.id),
    ...(planning?.current?.steps ?? []).filter((s) => s.status === 'succeeded').map((s) => s.id),
  ]);
  if (plan.steps.some((s) => taken.has(s.id))) return 'refused';
  // A turn per dependency level, plus the answer; a call per step; a write per write step. (This turn is debited.)
  const level = new Map<string, number>();
  for (const step of plan.steps) level.set(step.id, 1 + Math.max(0, ...step.depends_on.map((d) => level.get(d) ?? 0)));
  const turns = Math.max(...level.values()) + 1;
  const { limits, used } = prev.context.budget;
  const stepWrites = plan.steps.filter((s) => writes(s.tool)).length;
  // The budget is read off the model turn's settlement (this turn already counted).
  if (
    turns > limits.modelTurns - used.modelTurns ||
    plan.steps.length > limits.toolCalls - used.toolCalls ||
    stepWrites > limits.writes - used.writes
  )
    return 'refused';
  const approval = shadow.policy.approval;
  return approval === 'always' || (approval === 'writes' && stepWrites > 0) ? 'awaiting' : 'adopted';
}

export function harnessPlan(plan: ProposedPlan, writes: (tool: string) => boolean): HarnessPlan {
  const steps = plan.steps ?? [];
  return {
    callId: plan.callId,
    hash: harnessPlanHash(steps),
    steps: steps.map((s) => ({ id: s.id, tool: s.tool, write: writes(s.tool), dependsOn: [...new Set(s.depends_on)] })),
  };
}

/** A `user.confirmed` the harness counts as the genuine approval of the plan that waits (by its own hash). */
export function isGenuineApproval(shadow: PlanShadow, prev: SnapshotView, event: MachineEvent, user: string): boolean {
  const pending = prev.context.pendingConfirmation;
  return (
    event.type === 'user.confirmed' &&
    stateOf(prev) === '"awaitingPlanApproval"' &&
    shadow.awaiting !== null &&
    pending !== null &&
    event.confirmationId === pending.id &&
    event.userId === user &&
    event.argsHash === shadow.awaiting.hash &&
    event.policyVersion === prev.context.policy.version &&
    event.at < pending.expiresAt
  );
}

/** The tools the harness says a model turn may use: all (no plan narrows them), or the ready steps' of the plan. */
export function harnessOffer(shadow: PlanShadow, context: AgentContext): Set<string> | null {
  if (shadow.adopted === null) return shadow.policy.mode === 'plan_first' ? new Set() : null;
  return new Set(readyHarnessSteps(shadow.adopted, context).map((s) => s.tool));
}

/**
 * The steps of the plan the harness holds in force that may run: pending, every dependency succeeded. The statuses
 * are the machine's (each change of them is checked against what the harness delivered, on the edge it happens).
 */
export function readyHarnessSteps(plan: HarnessPlan, context: AgentContext): HarnessPlan['steps'] {
  const planning = context.plan;
  const current = planning?.current?.hash === plan.hash ? planning.current : null;
  const status = (id: string) => current?.steps.find((s) => s.id === id)?.status;
  const done = new Set([
    ...(planning?.earlier ?? []).map((s) => s.id),
    ...plan.steps.filter((s) => status(s.id) === 'succeeded').map((s) => s.id),
  ]);
  return plan.steps.filter((s) => status(s.id) === 'pending' && s.dependsOn.every((d) => done.has(d)));
}

/** The tool results this move delivers, by call, as the harness classifies them. */
function deliveredBy(prev: SnapshotView, move: MoveView): Delivered[] {
  const event = move.event;
  if (!event || move.inert) return [];
  const state = stateOf(prev);
  const batch = prev.context.batch;
  const current = batch?.calls.find((c) => c.callId === batch.current);
  const toolOf = (callId: string) => batch?.calls.find((c) => c.callId === callId)?.tool ?? '?';
  if (state === '{"executing":"reading"}' && event.type === 'xstate.done.actor.reads') {
    return event.output.results.map((r) => ({
      callId: r.callId,
      tool: toolOf(r.callId),
      outcome:
        r.outcome.kind === 'ok'
          ? 'ok'
          : r.outcome.kind === 'error' && r.outcome.code !== 'unavailable' && r.outcome.code !== 'timeout'
            ? 'error'
            : 'unknown',
    }));
  }
  if (state === '{"executing":"writing"}' && event.type === 'xstate.done.actor.write') {
    const writing = batch?.calls.find((c) => c.phase === 'writing');
    if (!writing) return [];
    const kind = event.output.outcome.kind;
    return [
      {
        callId: writing.callId,
        tool: writing.tool,
        outcome: kind === 'ok' ? 'ok' : kind === 'error' ? 'error' : 'unknown',
      },
    ];
  }
  if (state === '{"executing":"reconciling"}' && event.type === 'xstate.done.actor.lookup' && current) {
    const kind = event.output.result.kind;
    const outcome = kind === 'found' ? 'ok' : kind === 'not_found' ? 'not_done' : 'unknown';
    return [{ callId: current.callId, tool: current.tool, outcome }];
  }
  // A reviewer (the harness counts the sender as one) establishes what became of a held write.
  const held = prev.context.review;
  if (state === '"reviewRequired"' && event.type === 'review.resolved' && held && move.review?.reviewer) {
    if (event.resolution === 'happened' && move.review.valid)
      return [{ callId: held.callId, tool: held.tool, outcome: 'ok' }];
    if (event.resolution === 'not_happened') return [{ callId: held.callId, tool: held.tool, outcome: 'not_done' }];
  }
  return [];
}

/** The plan shadow after a move: the gate's expected decision, approvals, deliveries and the transcript ledger. */
export function advancePlanShadow(
  shadow: PlanShadow,
  prev: SnapshotView,
  move: MoveView,
  next: SnapshotView,
  emitted: readonly unknown[],
  user: string,
  writes: (tool: string) => boolean,
): PlanShadow {
  let { proposals, awaiting, adopted, delivered, open } = shadow;
  const ledger: string[] = [];
  const event = move.event;
  const fromState = stateOf(prev);
  const modelEvent =
    event?.type === 'xstate.done.actor.model' && event.output.kind === 'replied' && fromState === '"thinking"'
      ? event.output.event
      : null;
  if (modelEvent?.type === 'model.planProposed' && move.plan) {
    delivered = [];
    const expected = expectedGate(shadow, prev, move.plan, writes);
    if (expected !== 'limit') proposals += 1;
    if (expected === 'awaiting') [awaiting, adopted] = [harnessPlan(move.plan, writes), null];
    if (expected === 'adopted') [awaiting, adopted] = [null, harnessPlan(move.plan, writes)];
  } else if (modelEvent?.type === 'model.toolsProposed') {
    delivered = [];
  }
  if (event && awaiting && fromState === '"awaitingPlanApproval"' && !move.inert) {
    const pending = prev.context.pendingConfirmation;
    if (isGenuineApproval(shadow, prev, event, user)) [adopted, awaiting] = [awaiting, null];
    else if (event.type === 'user.rejected' && pending && event.confirmationId === pending.id && event.userId === user)
      awaiting = null;
    else if (
      pending &&
      ((event.type === 'timer.confirmationExpired' &&
        event.confirmationId === pending.id &&
        event.at >= pending.expiresAt) ||
        (event.type === 'user.confirmed' &&
          event.confirmationId === pending.id &&
          event.userId === user &&
          event.at >= pending.expiresAt))
    )
      awaiting = null;
    // (A cancel ends the task with the plan as it was: still not approved, none of it run.)
  }
  const now = deliveredBy(prev, move);
  if (now.length > 0) delivered = [...delivered.filter((d) => !now.some((n) => n.callId === d.callId)), ...now];
  // The conversation's ledger of propose_plan calls, from the transcript entries the machine emitted on this edge.
  for (const item of emitted) {
    const { type, entry } = item as { type: string; entry?: TranscriptEntry };
    if (type !== 'transcript' || !entry) continue;
    if (entry.kind === 'proposal') {
      for (const call of entry.calls) {
        if (call.tool !== PLAN_TOOL) continue;
        if (open.includes(call.callId)) ledger.push(`${call.callId} is proposed twice`);
        open = [...open, call.callId];
      }
    }
    if (entry.kind === 'result' && entry.observation.tool === PLAN_TOOL) {
      const callId = entry.observation.callId;
      if (!open.includes(callId)) ledger.push(`a result for ${callId}, which has no open proposal`);
      open = open.filter((id) => id !== callId);
    }
  }
  return { ...shadow, proposals, awaiting, adopted, delivered, open, ledger };
}
