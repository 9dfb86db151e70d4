/**
 * Plans: a proposal refused, adopted, or held for approval; the approval granted, rejected or expired; the steps'
 * statuses from the results of a batch. The proposal is a call of the host's `propose_plan` tool, so it and its
 * result sit in the model's conversation like any call (the result says what became of the plan).
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState, Observation, PendingConfirmation } from '../context.js';
import { PLAN_TOOL, type Plan, type PlanStep, type PlanningState } from '../plans.js';
import { planRefusal } from '../guards/plan.js';
import {
  estimateOf,
  parsedPlan,
  planHashOf,
  planningOf,
  progressText,
  readySteps,
  replacedBy,
  withResults,
} from '../lib/plan.js';
import type { AuditEntry, TranscriptEntry } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import type { Toolkit } from '../toolkit.js';
import { confirmationEntry, decisionOf, refusal } from './confirmation.js';
import { keptArguments } from './turn.js';
import { type Step, type StepResult, endWait } from './step.js';
import { stop } from './stop.js';

type PlanEvent = Extract<MachineEvent, { type: 'model.planProposed' }>;

const planEvent = (event: MachineEvent): PlanEvent => {
  if (event.type !== 'model.planProposed') throw new Error('expected model.planProposed');
  return event;
};

/** The proposal as the conversation keeps it: a call of `propose_plan`, with the arguments as the model sent them. */
function proposalEntry(context: AgentContext, event: PlanEvent): TranscriptEntry {
  return {
    kind: 'proposal',
    at: event.at,
    turn: context.turn,
    text: event.text,
    calls: [
      {
        callId: event.callId,
        tool: PLAN_TOOL,
        arguments: keptArguments(event.arguments, context.policy.maxArgumentBytes),
      },
    ],
  };
}

/** The result of the plan's call, as the model is shown it. */
function resultEntry(context: AgentContext, at: number, turn: number, observation: Observation): TranscriptEntry {
  return { kind: 'result', at, turn, observation };
}

function planFailure(callId: string, code: string, summary: string): Observation {
  return { callId, tool: PLAN_TOOL, ok: false, code, summary, retryable: true, gate: 'plan' };
}

/** What the model is told of a plan in force: its steps, and which may run now. */
function adoptedResult(planning: PlanningState, plan: Plan): Observation {
  return {
    callId: plan.callId,
    tool: PLAN_TOOL,
    ok: true,
    data: {
      plan: plan.id,
      status: 'adopted',
      ready: readySteps(planning).map((s) => s.id),
      progress: progressText(planning),
      note: 'Each step runs as a call of its tool, through every check of the host; only the ready steps are offered.',
    },
    truncated: false,
  };
}

function planEntry(
  context: AgentContext,
  event: MachineEvent,
  action: Extract<AuditEntry, { kind: 'plan' }>['action'],
  body: { plan?: Plan | null; callId: string; code?: string | null; summary: string; step?: PlanStep },
): AuditEntry {
  const { plan, step } = body;
  return auditEntry(context, event, {
    kind: 'plan',
    action,
    planId: plan?.id ?? null,
    callId: body.callId,
    hash: plan?.hash ?? null,
    code: body.code ?? null,
    summary: body.summary,
    ...(plan && (action === 'proposed' || action === 'adopted')
      ? {
          steps: plan.steps.map((s) => ({ id: s.id, tool: s.tool, effect: s.effect, dependsOn: s.dependsOn })),
          estimate: plan.estimate,
        }
      : {}),
    ...(step
      ? {
          step: {
            id: step.id,
            tool: step.tool,
            status: step.status,
            callId: step.callId,
            observedAt: step.observedAt,
            evidence: step.evidence,
          },
        }
      : {}),
  });
}

/** The proposed plan, checked: every check passed (the chart asked them first). */
function proposedPlan(context: AgentContext, event: PlanEvent, toolkit: Toolkit, status: Plan['status']): Plan {
  const parsed = parsedPlan(context, event, toolkit);
  if (!parsed.ok) throw new Error('a plan that failed its checks cannot be proposed');
  const n = planningOf(context).proposals + 1;
  return {
    id: `plan-${n}`,
    callId: event.callId,
    turn: context.turn,
    hash: planHashOf(toolkit, parsed.steps),
    proposedAt: event.at,
    status,
    approvedBy: [],
    estimate: estimateOf(context, parsed.steps, parsed.depth),
    steps: parsed.steps,
  };
}

/** A plan that fails a check: the model is told why and may propose again (the proposal is counted). */
export const refusePlan: Step = (context, event, toolkit) => {
  const proposed = planEvent(event);
  const refused = planRefusal(context, event, toolkit) ?? { code: 'plan_malformed', summary: 'the plan was refused' };
  const planning = planningOf(context);
  return {
    context: { plan: { ...planning, proposals: planning.proposals + 1 } },
    transcript: [
      proposalEntry(context, proposed),
      resultEntry(context, proposed.at, context.turn, planFailure(proposed.callId, refused.code, refused.summary)),
    ],
    audit: [planEntry(context, event, 'refused', { callId: proposed.callId, ...refused })],
  };
};

/** More plans than the policy allows: the task stops (`plan_limit`); the proposal still gets its result. */
export const stopForPlanLimit: Step = (context, event) => {
  const proposed = planEvent(event);
  const { maxProposals } = context.policy.planning;
  const message = `the model proposed more than ${maxProposals} plan(s), the policy's limit`;
  const stopped = stop(context, event, 'failed', { code: 'plan_limit', message });
  return {
    ...stopped,
    transcript: [
      proposalEntry(context, proposed),
      resultEntry(context, proposed.at, context.turn, planFailure(proposed.callId, 'plan_limit', message)),
      ...(stopped.transcript ?? []),
    ],
    audit: [
      planEntry(context, event, 'refused', { callId: proposed.callId, code: 'plan_limit', summary: message }),
      ...(stopped.audit ?? []),
    ],
  };
};

/** A plan that needs no approval: in force at once; the steps of the plan it replaces that succeeded stay facts. */
export const adoptPlan: Step = (context, event, toolkit) => {
  const proposed = planEvent(event);
  const plan = proposedPlan(context, proposed, toolkit, 'adopted');
  const before = planningOf(context);
  const planning = { ...replacedBy(before, plan), proposals: before.proposals + 1 };
  return {
    context: { plan: planning },
    transcript: [
      proposalEntry(context, proposed),
      resultEntry(context, proposed.at, context.turn, adoptedResult(planning, plan)),
    ],
    audit: [
      planEntry(context, event, 'adopted', {
        plan,
        callId: plan.callId,
        summary: `${plan.steps.length} step(s) adopted without approval (policy: ${context.policy.planning.approval})`,
      }),
    ],
  };
};

/** The confirmation a plan waits on: bound to its hash, decided by the task's user or the policy's approvers. */
function planConfirmation(context: AgentContext, plan: Plan, at: number): PendingConfirmation {
  const { approverScope } = context.policy.planning;
  const writes = plan.steps.filter((s) => s.effect === 'write').map((s) => s.tool);
  return {
    id: `${context.taskId}/${plan.id}`,
    taskId: context.taskId,
    callId: plan.callId,
    tool: PLAN_TOOL,
    argsHash: plan.hash,
    args: {
      plan: plan.id,
      steps: plan.steps.map((s) => ({ id: s.id, tool: s.tool, purpose: s.purpose, depends_on: s.dependsOn })),
      estimate: plan.estimate,
    },
    summary: `Approve ${plan.id}: ${plan.steps.map((s) => `${s.id} ${s.tool}`).join(', ')}${writes.length ? ` (writes: ${[...new Set(writes)].join(', ')}; each is still confirmed by its own rule)` : ''}`,
    userId: context.principal.userId,
    approverScope,
    approvalsRequired: 1,
    approvals: [],
    reasons: ['plan'],
    risk: writes.length ? 'writable' : 'read_only',
    policyVersion: context.policy.version,
    requestedAt: at,
    expiresAt: at + context.policy.confirmationTtlMs,
    request: 1,
  };
}

/** A plan the policy has approved first: persisted, the task waits; nothing of it runs until it is approved. */
export const requestPlanApproval: Step = (context, event, toolkit) => {
  const proposed = planEvent(event);
  const plan = proposedPlan(context, proposed, toolkit, 'awaiting_approval');
  const before = planningOf(context);
  const pending = planConfirmation(context, plan, proposed.at);
  return {
    context: {
      plan: { ...replacedBy(before, plan), proposals: before.proposals + 1 },
      pendingConfirmation: pending,
      waitingSince: context.waitingSince ?? pending.requestedAt,
    },
    transcript: [proposalEntry(context, proposed)],
    audit: [
      planEntry(context, event, 'proposed', {
        plan,
        callId: plan.callId,
        summary: `${plan.steps.length} step(s); waiting for approval`,
      }),
      confirmationEntry(context, event, 'requested', pending, null),
    ],
  };
};

/** The last decision needed: the plan is in force, with who approved it. */
export const grantPlanApproval: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  const decision = decisionOf(pending, event);
  const planning = planningOf(context);
  const plan = planning.current;
  if (event.type !== 'user.confirmed' || !decision || !plan) return {};
  const adopted: Plan = { ...plan, status: 'adopted', approvedBy: [...pending.approvals, decision] };
  const next = { ...planning, current: adopted };
  return {
    context: { plan: next, pendingConfirmation: null, ...endWait(context, event) },
    transcript: [resultEntry(context, event.at, plan.turn, adoptedResult(next, adopted))],
    audit: [
      confirmationEntry(context, event, 'granted', pending, null),
      planEntry(context, event, 'adopted', {
        plan: adopted,
        callId: plan.callId,
        summary: `approved by ${adopted.approvedBy.map((d) => d.userId).join(', ')}`,
      }),
    ],
    reply: { accepted: true, code: null, message: `approved; ${plan.id} is in force and its steps run one by one` },
  };
};

/**
 * The host now confirms under another policy version than the plan's approval was asked under: that request can
 * never be granted, so the same plan is asked again (fresh id and expiry, no approvals yet) under the new version.
 */
export const askPlanApprovalAgain: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  const refused = refusal(context, event);
  if (event.type !== 'user.confirmed' || !refused) return {};
  const at = timeOf(context, event);
  const request = pending.request + 1;
  const again: PendingConfirmation = {
    ...pending,
    id: `${pending.id.replace(/\.r\d+$/, '')}.r${request}`,
    approvals: [],
    policyVersion: event.policyVersion,
    requestedAt: at,
    expiresAt: at + context.policy.confirmationTtlMs,
    request,
  };
  return {
    context: { pendingConfirmation: again },
    audit: [...refused.audit, confirmationEntry(context, event, 'requested', again, null)],
    reply: { ...refused.reply, message: `${refused.reply.message} (now ${again.id})` },
  };
};

/** The plan is not approved: rejected, or nobody decided in time. It is dropped; the model is told and may re-plan. */
function dropPlan(context: AgentContext, event: MachineEvent, code: 'plan_rejected' | 'plan_expired', summary: string) {
  const pending = context.pendingConfirmation!;
  const planning = planningOf(context);
  const plan = planning.current!;
  const late = event.type === 'user.confirmed' ? refusal(context, event) : null;
  const action = code === 'plan_rejected' ? 'rejected' : 'expired';
  return {
    context: { plan: { ...planning, current: null }, pendingConfirmation: null, ...endWait(context, event) },
    transcript: [resultEntry(context, timeOf(context, event), plan.turn, planFailure(plan.callId, code, summary))],
    audit: [
      ...(late?.audit ?? []),
      confirmationEntry(
        context,
        event,
        action,
        pending,
        code === 'plan_rejected' ? 'confirmation_rejected' : 'confirmation_expired',
      ),
      planEntry(context, event, action, { plan, callId: plan.callId, code, summary }),
    ],
    late,
  };
}

export const rejectPlan: Step = (context, event) => {
  const by = event.type === 'user.rejected' ? ` by ${event.userId}` : '';
  const reason = event.type === 'user.rejected' && event.reason ? `: ${event.reason}` : '';
  const { late: _late, ...result } = dropPlan(
    context,
    event,
    'plan_rejected',
    `the plan was rejected${by}${reason}; none of it ran`,
  );
  return {
    ...result,
    reply: { accepted: true, code: null, message: 'rejected; the plan will not run and the model is told' },
  };
};

export const expirePlanApproval: Step = (context, event) => {
  const summary = 'nobody approved the plan in time; none of it ran';
  const { late, ...result } = dropPlan(context, event, 'plan_expired', summary);
  return { ...result, reply: late?.reply ?? { accepted: true, code: 'confirmation_expired', message: summary } };
};

/**
 * The steps a batch's results settle (called as the batch closes): each change audited, and the model shown the
 * plan's state as facts.
 */
export function planProgress(context: AgentContext, event: MachineEvent, calls: readonly CallState[]): StepResult {
  if (!context.plan) return {};
  const { planning, changed } = withResults(context.plan, calls, timeOf(context, event));
  if (changed.length === 0) return {};
  const turn = context.batch?.turn ?? context.turn;
  return {
    context: { plan: planning },
    audit: changed.map((step) =>
      planEntry(context, event, 'step', {
        plan: planning.current,
        callId: step.callId!,
        code: step.failure?.code ?? null,
        summary: `${step.id} ${step.tool} ${step.status}`,
        step,
      }),
    ),
    transcript: [{ kind: 'plan_progress', at: timeOf(context, event), turn, text: progressText(planning) }],
  };
}
