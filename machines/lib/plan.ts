/**
 * The plan gate and a plan's progress, pure. A proposed plan is checked in order (planning on, proposals left, well
 * formed, tools permitted, within the mandate, within the budget); each check is a named guard of the chart and
 * `planRefusal` derives the refusal from the same functions. Once adopted, the steps whose dependencies all
 * succeeded are the ones whose tools the model is offered; a step's status changes only from a call's result.
 */
import type { AgentContext, CallState, Json, Observation } from '../context.js';
import type { MachineEvent } from '../actors.js';
import {
  PLAN_LIMITS,
  PLAN_TOOL,
  type Plan,
  type PlanEstimate,
  type PlanStep,
  type PlanningState,
  planArgumentsSchema,
} from '../plans.js';
import type { Toolkit } from '../toolkit.js';
import { argumentsHash } from './hashing.js';
import { modelTurnNeed, remaining } from './budget.js';
import { identifiersOf } from './observedFacts.js';
import { parseStrictJson } from './strictJson.js';
import { zodSummary } from './text.js';

/** A plan as proposed: the steps in the model's order, or why it cannot be one. */
type Parsed =
  | { ok: true; steps: PlanStep[]; depth: number }
  | { ok: false; code: 'plan_malformed' | 'plan_cycle' | 'unknown_tool'; summary: string };

const parsedOf = new WeakMap<object, Parsed>();

/** The proposal event's plan, parsed once per event (several guards and the step of one transition ask). */
export function parsedPlan(context: AgentContext, event: MachineEvent, toolkit: Toolkit): Parsed {
  if (event.type !== 'model.planProposed') return { ok: false, code: 'plan_malformed', summary: 'no plan proposed' };
  const cached = parsedOf.get(event);
  if (cached) return cached;
  const result = parse(context, event.arguments, toolkit);
  parsedOf.set(event, result);
  return result;
}

function parse(context: AgentContext, text: string, toolkit: Toolkit): Parsed {
  const json = parseStrictJson(text);
  if (!json.ok) return { ok: false, code: 'plan_malformed', summary: `the plan is not valid JSON: ${json.message}` };
  const shape = planArgumentsSchema.safeParse(json.value);
  if (!shape.success) return { ok: false, code: 'plan_malformed', summary: zodSummary(shape.error as never) };
  const max = context.policy.planning.maxSteps;
  if (shape.data.steps.length > max)
    return { ok: false, code: 'plan_malformed', summary: `a plan has at most ${max} steps` };
  // What earlier plans established: a re-plan may depend on it (and may not reuse its ids).
  const earlier = succeededIds(planningOf(context));
  const ids = new Set<string>();
  for (const step of shape.data.steps) {
    if (ids.has(step.id) || earlier.has(step.id))
      return { ok: false, code: 'plan_malformed', summary: `step id ${JSON.stringify(step.id)} is used twice` };
    ids.add(step.id);
  }
  const steps: PlanStep[] = [];
  for (const step of shape.data.steps) {
    const rules = step.tool === PLAN_TOOL ? undefined : toolkit.rules(step.tool);
    if (!rules || !context.catalog[step.tool])
      return { ok: false, code: 'unknown_tool', summary: `step ${step.id}: no tool named ${step.tool} is installed` };
    const dependsOn = [...new Set(step.depends_on ?? [])];
    const unknown = dependsOn.find((dep) => !ids.has(dep) && !earlier.has(dep));
    if (unknown !== undefined)
      return { ok: false, code: 'plan_malformed', summary: `step ${step.id} depends on an unknown step ${unknown}` };
    steps.push({
      id: step.id,
      tool: step.tool,
      effect: rules.effect,
      purpose: step.purpose,
      dependsOn,
      status: 'pending',
      callId: null,
      observedAt: null,
      evidence: [],
      failure: null,
    });
  }
  const depth = depthOf(steps);
  if (depth === null)
    return { ok: false, code: 'plan_cycle', summary: 'the steps depend on each other in a cycle; a plan is acyclic' };
  return { ok: true, steps, depth };
}

/** The number of dependency levels (the least number of rounds the plan needs), or null for a cycle. */
function depthOf(steps: readonly PlanStep[]): number | null {
  const level = new Map<string, number>();
  const visiting = new Set<string>();
  const byId = new Map(steps.map((s) => [s.id, s]));
  const visit = (id: string): number | null => {
    const known = level.get(id);
    if (known !== undefined) return known;
    const step = byId.get(id);
    if (!step) return 0; // a step an earlier plan completed
    if (visiting.has(id)) return null;
    visiting.add(id);
    let deepest = 0;
    for (const dep of step.dependsOn) {
      const d = visit(dep);
      if (d === null) return null;
      deepest = Math.max(deepest, d);
    }
    visiting.delete(id);
    level.set(id, deepest + 1);
    return deepest + 1;
  };
  let depth = 0;
  for (const step of steps) {
    const d = visit(step.id);
    if (d === null) return null;
    depth = Math.max(depth, d);
  }
  return depth;
}

/** The task's planning state (none proposed yet: empty). */
export function planningOf(context: AgentContext): PlanningState {
  return context.plan ?? { current: null, proposals: 0, earlier: [] };
}

/** The first step tool the task's principal may not use (the permission gate would refuse every call of it). */
export function unpermittedTool(context: AgentContext, steps: readonly PlanStep[], toolkit: Toolkit): string | null {
  for (const step of steps) {
    const scopes = toolkit.rules(step.tool)?.scopes ?? [];
    if (!scopes.every((scope) => context.principal.scopes.includes(scope))) return step.tool;
  }
  return null;
}

/**
 * The first write step (or read of the success criterion's tool) whose tool cannot be checked against the task's
 * mandate (it declares no rule): the mandate gate would refuse its calls.
 */
export function uncheckedWrite(context: AgentContext, steps: readonly PlanStep[], toolkit: Toolkit): string | null {
  if (context.mandate === null) return null;
  const step = steps.find(
    (s) => (s.effect === 'write' || s.tool === context.success?.tool) && !toolkit.rules(s.tool)?.mandate,
  );
  return step?.tool ?? null;
}

/** What the plan is estimated to cost: a turn per dependency level plus the answer, a call per step. */
export function estimateOf(context: AgentContext, steps: readonly PlanStep[], depth: number): PlanEstimate {
  const turn = modelTurnNeed(context.modelReservation, context.budget);
  const modelTurns = depth + 1;
  return {
    modelTurns,
    toolCalls: steps.length,
    writes: steps.filter((s) => s.effect === 'write').length,
    tokens: modelTurns * (turn.tokens ?? 0),
    costMicros: modelTurns * (turn.costMicros ?? 0),
  };
}

/** The first budget dimension the estimate would overdraw, or null when it fits what is left. */
export function estimateShortfall(context: AgentContext, estimate: PlanEstimate): keyof PlanEstimate | null {
  const left = remaining(context.budget);
  for (const key of ['modelTurns', 'toolCalls', 'writes', 'tokens', 'costMicros'] as const) {
    if (estimate[key] > left[key]) return key;
  }
  return null;
}

/** `sha256:` of the plan as the approver sees it: what an approval is bound to. */
export function planHashOf(toolkit: Toolkit, steps: readonly PlanStep[]): string {
  return argumentsHash(
    toolkit.sha256,
    steps.map((s) => ({ id: s.id, tool: s.tool, purpose: s.purpose, depends_on: s.dependsOn })),
  );
}

const succeededIds = (planning: PlanningState): Set<string> =>
  new Set([
    ...planning.earlier.map((s) => s.id),
    ...(planning.current?.steps ?? []).filter((s) => s.status === 'succeeded').map((s) => s.id),
  ]);

/** The adopted plan's steps that may run now: pending, every dependency succeeded. */
export function readySteps(planning: PlanningState): PlanStep[] {
  const plan = planning.current;
  if (plan?.status !== 'adopted') return [];
  const done = succeededIds(planning);
  return plan.steps.filter((s) => s.status === 'pending' && s.dependsOn.every((dep) => done.has(dep)));
}

/** The adopted plan cannot go on: a step failed, or nothing is ready while steps are still pending. */
export function isPlanStuck(planning: PlanningState): boolean {
  const plan = planning.current;
  if (plan?.status !== 'adopted') return false;
  if (plan.steps.some((s) => s.status === 'failed')) return true;
  return plan.steps.some((s) => s.status === 'pending') && readySteps(planning).length === 0;
}

/**
 * The tools the plan allows this turn: null when the plan does not narrow them (planning off, or optional and no plan
 * adopted); otherwise the ready steps' tools (none while a plan waits for approval, in `plan_first` before one is
 * adopted, or once every step is done: the model can re-plan or answer).
 */
export function planOffer(context: AgentContext): string[] | null {
  const { mode } = context.policy.planning;
  const planning = planningOf(context);
  if (mode === 'off') return null;
  if (planning.current?.status !== 'adopted') return mode === 'plan_first' ? [] : null;
  return [...new Set(readySteps(planning).map((s) => s.tool))];
}

/** The model may propose a plan now: planning is on, proposals are left, and there is none or it cannot go on. */
export function canProposePlan(context: AgentContext): boolean {
  const { mode, maxProposals } = context.policy.planning;
  const planning = planningOf(context);
  if (mode === 'off' || planning.proposals >= maxProposals) return false;
  return planning.current === null || isPlanStuck(planning);
}

/**
 * The adopted plan after a batch's results: each call that returned binds to the first ready step of its tool not
 * yet bound in this batch. A trusted result makes it `succeeded` (with what it named and when it was observed); the
 * tool's own failure (a conflict, an error) makes it `failed`, and the model may re-plan; a gate's refusal or an
 * unknown outcome (a timeout: nothing is known to have happened) leaves it pending.
 */
export function withResults(
  planning: PlanningState,
  calls: readonly CallState[],
  at: number,
): { planning: PlanningState; changed: PlanStep[] } {
  const plan = planning.current;
  if (plan?.status !== 'adopted') return { planning, changed: [] };
  const ready = readySteps(planning);
  const bound = new Set<string>();
  const updates = new Map<string, PlanStep>();
  for (const call of calls) {
    const observation = call.observation;
    if (!observation) continue;
    const step = ready.find((s) => s.tool === call.tool && !bound.has(s.id));
    if (!step) continue;
    if (observation.ok) {
      bound.add(step.id);
      updates.set(step.id, {
        ...step,
        status: 'succeeded',
        callId: call.callId,
        observedAt: at,
        evidence: identifiersOf(observation.data as Json).slice(0, PLAN_LIMITS.evidenceIds),
      });
    } else if (observation.gate === undefined && !isUnknown(observation.code)) {
      bound.add(step.id);
      updates.set(step.id, {
        ...step,
        status: 'failed',
        callId: call.callId,
        observedAt: at,
        failure: { code: observation.code, summary: observation.summary.slice(0, 1_000) },
      });
    }
  }
  if (updates.size === 0) return { planning, changed: [] };
  const steps = plan.steps.map((s) => updates.get(s.id) ?? s);
  return { planning: { ...planning, current: { ...plan, steps } }, changed: [...updates.values()] };
}

/**
 * Codes that say nothing is known about the effect: the step is not failed, it is still to be established. The host
 * losing a result (`internal_error`) is one: it is not the tool's failure.
 */
const isUnknown = (code: string) =>
  code === 'internal_error' ||
  code === 'timeout' ||
  code === 'unavailable' ||
  code === 'interrupted' ||
  code === 'outcome_unknown' ||
  code === 'lookup_failed';

/** Replaces the current plan by `next`: its succeeded steps are kept as facts, its pending ones are skipped. */
export function replacedBy(planning: PlanningState, next: Plan | null): PlanningState {
  const old = planning.current;
  const kept = (old?.steps ?? []).filter((s) => s.status === 'succeeded');
  return {
    current: next,
    proposals: planning.proposals,
    earlier: [...planning.earlier, ...kept].slice(-PLAN_LIMITS.earlier),
  };
}

/**
 * The result of the `propose_plan` call of a plan that still waits for approval when the task stops (every call the
 * conversation holds gets its result), or null when no plan waits.
 */
export function unapprovedPlanResult(planning: PlanningState, code: string): Observation | null {
  const plan = planning.current;
  if (plan?.status !== 'awaiting_approval') return null;
  const summary = `the task stopped (${code}) before ${plan.id} was approved; none of it ran`;
  return { callId: plan.callId, tool: PLAN_TOOL, ok: false, code, summary, retryable: false, gate: 'plan' };
}

/** The plan as the outcome keeps it: pending steps of a stopped task become `skipped`. */
export function finalPlan(plan: Plan): Plan {
  return { ...plan, steps: plan.steps.map((s) => (s.status === 'pending' ? { ...s, status: 'skipped' as const } : s)) };
}

/** The plan's state as the model is shown it: facts from tool results, with the time each was observed. */
export function progressText(planning: PlanningState): string {
  const plan = planning.current;
  if (!plan) return 'no plan is in force';
  const ready = new Set(readySteps(planning).map((s) => s.id));
  const lines = plan.steps.map((s) => {
    const deps = s.dependsOn.length ? ` (after ${s.dependsOn.join(', ')})` : '';
    if (s.status === 'succeeded') {
      const named = s.evidence.length ? `, returned ${s.evidence.join(', ')}` : '';
      return `- ${s.id} ${s.tool}: succeeded (call ${s.callId}, observed at ${new Date(s.observedAt!).toISOString()}${named})`;
    }
    // The code only: a failure's summary is the tool's own words, and this note is the host's.
    if (s.status === 'failed') return `- ${s.id} ${s.tool}: failed (${s.failure?.code})`;
    return `- ${s.id} ${s.tool}${deps}: ${s.status}${ready.has(s.id) ? ', ready to run' : ''}`;
  });
  return `${plan.id}:\n${lines.join('\n')}`;
}
