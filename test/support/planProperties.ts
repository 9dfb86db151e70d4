/**
 * P9, plans: the safety rules of plan-and-execute, checked on every state and transition of the plan world against
 * the harness's own reading (`planWorld.ts`): which plans it had the model propose and what the gate must make of
 * them, which approvals were genuine, which tool results it delivered.
 *
 * - P9 plan gate: a proposal is refused, held for approval, adopted, or stops the task (`plan_limit`) as the harness
 *   reads the policy; the plan held or in force is the one the harness proposed (its hash, its steps); the proposals
 *   never exceed `planning.maxProposals`.
 * - P9 plan approval: no tool call starts while a plan awaits approval; a plan is approved only by a `user.confirmed`
 *   from the task's user for the pending request, in time, whose argsHash is the plan's hash as the harness computed it.
 * - P9 plan first: in `plan_first` mode no call (write or read) starts before a plan is in force.
 * - P9 plan steps: a call that starts under a plan in force is of a ready step's tool (pending, its dependencies
 *   succeeded).
 * - P9 plan facts: a step becomes `succeeded` only from a trusted ok result the harness delivered for a call of its
 *   tool, in the batch that closes (or stops) on that edge, after the plan was proposed; `failed` only from that
 *   tool's own failure (or a lookup that established the write was not done), never from a gate, a stop, a lost
 *   result or an unknown outcome; no status goes back. The outcome's plan is held to the same rule.
 * - P9 plan transcript: every `propose_plan` call the model's conversation holds gets exactly one result, by the end.
 */
import type { AgentContext, Plan } from '../../machines/context.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { CATALOG, FINAL_STATES, type Move, USER, type World, startedCalls, valueOf } from './agentWorld.js';
import { type PlanShadow, expectedGate, isGenuineApproval, readyHarnessSteps } from './planWorld.js';

const writes = (tool: string) => CATALOG[tool]?.effect === 'write';
const sameSteps = (plan: Plan, harness: NonNullable<PlanShadow['adopted']>) =>
  JSON.stringify(plan.steps.map((s) => [s.id, s.tool, s.dependsOn])) ===
  JSON.stringify(harness.steps.map((s) => [s.id, s.tool, s.dependsOn]));

/** P9 rules about one reached state of the plan world. */
export function planStateProblems(world: World): string[] {
  const shadow = world.shadow.plan;
  if (!shadow) return [];
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`P9 ${rule}: ${detail}`);
  const { context } = world.machine;
  const value = valueOf(world.machine);
  const current = context.plan?.current ?? null;
  const pending = context.pendingConfirmation;
  const final = FINAL_STATES.has(value);
  if (!final && (value === 'awaitingPlanApproval') !== (shadow.awaiting !== null))
    fail('plan approval', `the machine is in ${value}; the harness has ${shadow.awaiting ? 'a' : 'no'} plan waiting`);
  if (shadow.awaiting) {
    const { hash, callId } = shadow.awaiting;
    if (current?.status !== 'awaiting_approval' || current.hash !== hash || !sameSteps(current, shadow.awaiting))
      fail(
        'plan gate',
        `the plan waiting is ${current?.id} ${current?.status} ${current?.hash}, not the harness's ${hash}`,
      );
    const bound =
      pending !== null &&
      pending.tool === PLAN_TOOL &&
      pending.argsHash === hash &&
      pending.callId === callId &&
      pending.userId === USER &&
      pending.expiresAt === pending.requestedAt + context.policy.confirmationTtlMs;
    // (A stop clears the pending confirmation: in a final state the plan stays as it was, never approved.)
    if (!bound && !final)
      fail(
        'plan approval',
        `the plan waits on ${JSON.stringify(pending && [pending.tool, pending.argsHash, pending.userId])}`,
      );
  } else if (shadow.adopted) {
    if (current?.status !== 'adopted' || current.hash !== shadow.adopted.hash || !sameSteps(current, shadow.adopted))
      fail('plan gate', `the plan in force is ${current?.id} ${current?.status}, not the one the harness adopted`);
  } else if (current !== null) {
    fail('plan gate', `${current.id} is ${current.status}, but the harness has no plan waiting or in force`);
  }
  const proposals = context.plan?.proposals ?? 0;
  if (proposals !== shadow.proposals || proposals > shadow.policy.maxProposals)
    fail(
      'plan gate',
      `${proposals} proposal(s) counted; the harness made ${shadow.proposals}, the policy allows ${shadow.policy.maxProposals}`,
    );
  for (const step of current?.steps ?? [])
    if (step.status === 'skipped') fail('plan facts', `${step.id} is skipped in a plan still in force`);
  if (final && shadow.open.length > 0)
    fail('plan transcript', `the task ended with ${shadow.open.join(', ')} never given a result`);
  return problems;
}

/** The transcript entries the machine emitted on the move that reached `world`. */
function transcriptOf(world: World): TranscriptEntry[] {
  return (world.emitted ?? [])
    .map((e) => e as { type: string; entry?: TranscriptEntry })
    .filter((e) => e.type === 'transcript' && e.entry)
    .map((e) => e.entry!);
}

/** Status changes of the steps of `before`'s current plan in `after` (the same plan), with where they are seen. */
function statusChanges(before: AgentContext, after: AgentContext) {
  const was = before.plan?.current;
  const changes: { where: string; from: string; step: Plan['steps'][number] }[] = [];
  const compare = (where: string, plan: Plan | null | undefined) => {
    if (!was || !plan || plan.id !== was.id) return;
    for (const step of plan.steps) {
      const old = was.steps.find((s) => s.id === step.id);
      if (old && old.status !== step.status) changes.push({ where, from: old.status, step });
    }
  };
  compare('plan', after.plan?.current);
  if (!before.outcome) compare('outcome', after.outcome?.plan);
  return changes;
}

/** P9 rules about one transition of the plan world. */
export function planEdgeProblems(prev: World, move: Move, next: World): string[] {
  const shadow = prev.shadow.plan;
  const after = next.shadow.plan;
  if (!shadow || !after) return [];
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`P9 ${rule}: ${detail}`);
  const from = valueOf(prev.machine);
  const to = valueOf(next.machine);
  const before = prev.machine.context;
  const now = next.machine.context;
  const event = move.event;

  for (const problem of after.ledger) fail('plan transcript', `${problem}, after ${move.type}`);

  // The gate, as the harness reads the policy and what is left of the budget.
  if (move.plan && from === 'thinking') {
    const expected = expectedGate(shadow, prev.machine, move.plan, writes);
    const result = transcriptOf(next).find((e) => e.kind === 'result' && e.observation.callId === move.plan!.callId) as
      Extract<TranscriptEntry, { kind: 'result' }> | undefined;
    if (expected === 'limit') {
      if (to !== 'failed' || now.outcome?.reason.code !== 'plan_limit')
        fail('plan gate', `proposal ${shadow.proposals + 1} of at most ${shadow.policy.maxProposals} leads to ${to}`);
    } else if (expected === 'awaiting') {
      if (to !== 'awaitingPlanApproval') fail('plan gate', `${move.type} needs approval but leads to ${to}`);
    } else {
      if (to === 'awaitingPlanApproval') fail('plan gate', `${move.type} (${expected}) waits for approval`);
      const ok = expected === 'adopted';
      const reused = (move.plan.steps ?? []).some((s) =>
        [...(before.plan?.earlier ?? []), ...(before.plan?.current?.steps ?? [])].some(
          (t) => t.id === s.id && t.status === 'succeeded',
        ),
      );
      const code =
        expected === 'in_force' ? 'plan_in_force' : (move.plan.refusal ?? (reused ? 'plan_malformed' : 'over_budget'));
      if (
        !result ||
        result.observation.ok !== ok ||
        (!ok && !result.observation.ok && result.observation.code !== code)
      )
        fail(
          'plan gate',
          `${move.type} should be ${ok ? 'adopted' : `refused (${code})`}; its result is ${JSON.stringify(result?.observation ?? null)}`,
        );
    }
  }

  // An approval: only the task user's confirmation of the pending request, in time, of the plan's own hash.
  const was = before.plan?.current;
  const is = now.plan?.current;
  if (was?.status === 'awaiting_approval' && is?.id === was.id && is.status === 'adopted') {
    if (!event || !isGenuineApproval(shadow, prev.machine, event, USER))
      fail('plan approval', `${was.id} is approved by ${move.type}, not by the task user's confirmation of its hash`);
    if (is.approvedBy.length !== 1 || is.approvedBy[0]!.userId !== USER)
      fail('plan approval', `${was.id} is approved by ${JSON.stringify(is.approvedBy.map((d) => d.userId))}`);
  }

  // Calls that start: none while a plan waits; none before a plan in plan_first; only a ready step's tool.
  for (const call of startedCalls(prev.machine, next.machine)) {
    const what = `${call.effect} ${call.tool} (${call.callId})`;
    if (shadow.awaiting || was?.status === 'awaiting_approval' || to === 'awaitingPlanApproval') {
      fail('plan approval', `${what} starts while a plan awaits approval, after ${move.type}`);
    } else if (!shadow.adopted) {
      if (shadow.policy.mode === 'plan_first') fail('plan first', `${what} starts before a plan is adopted`);
    } else {
      const ready = readyHarnessSteps(shadow.adopted, before).map((s) => s.tool);
      if (!ready.includes(call.tool))
        fail('plan steps', `${what} starts, but no ready step names it (ready: ${ready.join(', ') || 'none'})`);
    }
  }

  // Step statuses change only from the tool results the harness delivered, on the edge the batch closes or stops.
  for (const { where, from: old, step } of statusChanges(before, now)) {
    const what = `${where} ${was!.id} step ${step.id} (${step.tool}) went ${old} -> ${step.status} after ${move.type}`;
    const delivered = after.delivered.find((d) => d.callId === step.callId);
    if (old !== 'pending') fail('plan facts', what);
    else if (step.status === 'skipped') {
      if (where !== 'outcome') fail('plan facts', what);
    } else if (!delivered || delivered.tool !== step.tool)
      fail('plan facts', `${what}, but the harness delivered no result of ${step.tool} for ${step.callId} under it`);
    else if (step.status === 'succeeded' && delivered.outcome !== 'ok')
      fail('plan facts', `${what} from a result the harness gave as ${delivered.outcome}`);
    else if (step.status === 'failed' && delivered.outcome !== 'error' && delivered.outcome !== 'not_done')
      fail('plan facts', `${what} from a result the harness gave as ${delivered.outcome}`);
  }
  if (is && is.id !== was?.id && is.steps.some((s) => s.status !== 'pending'))
    fail('plan facts', `${is.id} starts with steps already settled`);
  return problems;
}
