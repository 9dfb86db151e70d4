/**
 * Sub-tasks, the pure rules: what a call of a sub-task tool would start (goal, tools, mandate, share of the budgets),
 * the first check it fails against the parent (tools within the parent's, mandate no wider, share within what is
 * left), and the share given back when the child ends. The guards and steps of `guards/subtask.ts` and
 * `steps/subtask.ts` ask these.
 */
import type { AgentContext, BudgetCounters, CallState, Json, Mandate, SubtaskLink, SubtaskShare } from '../context.js';
import { MAX_SUBTASKS, childTaskIdOf } from '../subtasks.js';
import type { GateName } from '../calls.js';
import type { Toolkit } from '../toolkit.js';
import { checkArguments, copyOf } from './arguments.js';
import { debit, shortfall } from './budget.js';
import type { MachineEvent } from '../actors.js';
import { type AuditEntry, auditEntry } from '../journal.js';

export interface SubtaskSpec {
  goal: string;
  tools: string[];
  mandate: { kind: string; terms: Json } | null;
  share: SubtaskShare;
  success: NonNullable<AgentContext['success']> | null;
}

export type SubtaskProblem = { check: 'tools' | 'mandate' | 'budget'; gate: GateName; code: string; summary: string };

const DIMENSIONS = ['modelTurns', 'toolCalls', 'writes', 'retries', 'tokens', 'costMicros', 'money'] as const;

/** True when `call`'s tool is a sub-task tool. */
export function isSubtaskTool(toolkit: Toolkit, tool: string): boolean {
  return toolkit.rules(tool)?.subtask !== undefined;
}

/** What the call would start, or why it cannot be said (a rule threw or returned something unusable). */
export function subtaskSpec(
  context: AgentContext,
  call: CallState,
  toolkit: Toolkit,
): { ok: true; spec: SubtaskSpec } | (SubtaskProblem & { ok: false }) {
  const rules = toolkit.rules(call.tool);
  const sub = rules?.subtask;
  const fail = (check: SubtaskProblem['check'], gate: GateName, code: string, summary: string) =>
    ({ ok: false, check, gate, code, summary }) as const;
  if (!rules || !sub) return fail('tools', 'schema', 'unknown_tool', `${call.tool} is not a sub-task tool`);
  const parsed = checkArguments(call.tool, rules, call.args, context);
  if (!parsed.ok) return fail('tools', 'schema', 'invalid_arguments', parsed.summary);
  let goal: unknown;
  let budget: unknown;
  let mandate: ReturnType<typeof sub.mandate>;
  try {
    goal = sub.goal(copyOf(parsed.parsed));
    budget = sub.budget(copyOf(parsed.parsed));
    mandate = sub.mandate(copyOf(parsed.parsed), context.mandate ? (copyOf(context.mandate) as Mandate) : null);
  } catch (error) {
    return fail('tools', 'schema', 'invalid_arguments', `the sub-task's rules failed: ${String(error).slice(0, 200)}`);
  }
  if (typeof goal !== 'string' || goal.trim() === '' || goal.length > 4_000)
    return fail('tools', 'schema', 'invalid_arguments', "the sub-task's goal is empty or longer than 4,000 characters");
  if (!mandate || typeof mandate !== 'object' || (mandate.ok && mandate.mandate === undefined))
    return fail('mandate', 'mandate', 'subtask_mandate_not_narrower', "the sub-task's mandate rule gave no answer");
  if (!mandate.ok)
    return fail('mandate', 'mandate', 'subtask_mandate_not_narrower', `${mandate.summary} [${mandate.code}]`);
  if (context.mandate !== null && mandate.mandate === null)
    return fail(
      'mandate',
      'mandate',
      'subtask_mandate_not_narrower',
      'the parent has a mandate: the child needs one too',
    );
  const given = (budget && typeof budget === 'object' ? budget : {}) as Record<string, unknown>;
  const share = {} as SubtaskShare;
  for (const key of DIMENSIONS) {
    const value = given[key];
    const fallback =
      key === 'tokens' || key === 'costMicros'
        ? ((given.modelTurns as number) ?? 0) * context.modelReservation[key]
        : 0;
    const amount = value === undefined ? fallback : value;
    if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 0)
      return fail('budget', 'budget', 'over_budget', `the sub-task's ${key} share is not a whole amount`);
    share[key] = amount;
  }
  return {
    ok: true,
    spec: { goal, tools: [...sub.tools], mandate: mandate.mandate, share, success: sub.success ?? null },
  };
}

/** The tools a task may use at all: its own subset (a sub-task), or every tool of its catalog. */
export function toolsOf(context: AgentContext): string[] {
  return context.tools ?? Object.keys(context.catalog);
}

/** The first check the call fails against the parent, or null: tools, then mandate, then budget. */
export function subtaskProblem(
  context: AgentContext,
  call: CallState,
  toolkit: Toolkit,
  now: number,
): SubtaskProblem | null {
  const found = subtaskSpec(context, call, toolkit);
  if (!found.ok) return found;
  // A child is linked by the call id that started it: the model's ids for a later call may repeat an earlier one.
  if (context.subtasks.some((link) => link.callId === call.callId))
    return {
      check: 'tools',
      gate: 'schema',
      code: 'duplicate_call_id',
      summary: `call id ${JSON.stringify(call.callId)} already started a sub-task in this task: use a new call id`,
    };
  const { spec } = found;
  const mine = toolsOf(context);
  for (const tool of spec.tools) {
    const rules = toolkit.rules(tool);
    const scopes = rules?.scopes ?? [];
    if (!rules || !mine.includes(tool) || !scopes.every((scope) => context.principal.scopes.includes(scope)))
      return {
        check: 'tools',
        gate: 'permission',
        code: 'subtask_tools_not_permitted',
        summary: `the sub-task would use ${tool}, which this task may not use`,
      };
    if (rules.subtask)
      return {
        check: 'tools',
        gate: 'permission',
        code: 'subtask_tools_not_permitted',
        summary: `the sub-task would use ${tool}, itself a sub-task tool (one level only)`,
      };
  }
  const need = shareNeed(spec.share);
  const short = shortfall(context.budget, need, now);
  if (short !== null)
    return {
      check: 'budget',
      gate: 'budget',
      code: 'over_budget',
      summary: `the sub-task's share does not fit what is left of this task's budget (${short})`,
    };
  return null;
}

/** What a call of a sub-task tool takes from the parent: the call itself (one call, one write) and the child's share. */
export function shareNeed(share: SubtaskShare): Partial<BudgetCounters> {
  return { ...share, toolCalls: share.toolCalls + 1, writes: share.writes + 1 };
}

/** What the child spent above its share: charged to the parent. */
export function excessUsed(share: SubtaskShare, used: SubtaskShare): SubtaskShare {
  const over = {} as SubtaskShare;
  for (const key of DIMENSIONS) over[key] = Math.max(0, Math.max(0, used[key]) - share[key]);
  return over;
}

/** What of the share the child did not spend: given back to the parent. */
export function unusedShare(share: SubtaskShare, used: SubtaskShare): SubtaskShare {
  const back = {} as SubtaskShare;
  for (const key of DIMENSIONS) back[key] = Math.max(0, share[key] - Math.max(0, used[key]));
  return back;
}

/**
 * The parent's budget once its child ended: charged what the child used in place of the share it reserved. What the
 * child did not spend goes back; what it spent above its share (a model turn's actual usage above its reservation, an
 * undo) is charged, so the parent never counts less than its child spent.
 */
export function settleShare(context: AgentContext, share: SubtaskShare, used: SubtaskShare): AgentContext['budget'] {
  const amount: Partial<BudgetCounters> = {};
  for (const key of DIMENSIONS) amount[key] = Math.max(0, used[key]) - share[key];
  return debit(context.budget, amount);
}

/** The parent's budget with `back` given back. */
export function giveBack(context: AgentContext, back: SubtaskShare): AgentContext['budget'] {
  const amount: Partial<BudgetCounters> = {};
  for (const key of DIMENSIONS) amount[key] = -back[key];
  return debit(context.budget, amount);
}

/**
 * The child's link, recorded in the transition that starts the write (so it is in the snapshot saved before the
 * start is sent): its id from this task's id and the call's key, its goal, tools, mandate, share and deadline.
 */
export function withSubtaskLink(context: AgentContext, call: CallState, toolkit: Toolkit, at: number): SubtaskLink[] {
  if (!call.idempotencyKey || context.subtasks.some((link) => link.callId === call.callId)) return context.subtasks;
  const found = subtaskSpec(context, call, toolkit);
  if (!found.ok) return context.subtasks;
  const { spec } = found;
  const childTaskId = childTaskIdOf(toolkit.sha256, context.taskId, call.idempotencyKey);
  const link: SubtaskLink = {
    callId: call.callId,
    tool: call.tool,
    childTaskId,
    goal: spec.goal,
    tools: spec.tools,
    // A mandate authorises one task: the child's id is its mandate's id, so a start sent again holds the same claim.
    mandate: spec.mandate ? { ...spec.mandate, id: childTaskId } : null,
    success: spec.success,
    share: spec.share,
    deadlineAt: context.budget.deadlineAt,
    status: 'starting',
    startedAt: at,
    outcome: null,
  };
  return [...context.subtasks, link].slice(-MAX_SUBTASKS);
}

/** A `subtask` audit entry about `link`. */
export function subtaskEntry(
  context: AgentContext,
  event: MachineEvent,
  link: SubtaskLink,
  action: 'reserved' | 'started' | 'finished' | 'released',
  summary: string,
  amounts: { share?: SubtaskLink['share']; returned?: SubtaskLink['share']; charged?: SubtaskLink['share'] } = {},
): AuditEntry {
  return auditEntry(context, event, {
    kind: 'subtask',
    action,
    callId: link.callId,
    tool: link.tool,
    childTaskId: link.childTaskId,
    status: link.outcome?.status ?? null,
    summary,
    ...amounts,
  });
}

/** The share taken from the parent as the start is sent (in `startWrite`'s transition), for the audit. */
export function subtaskReservedEntries(context: AgentContext, event: MachineEvent, callId: string): AuditEntry[] {
  const link = context.subtasks.find((l) => l.callId === callId);
  if (!link || link.status !== 'starting') return [];
  return [
    subtaskEntry(context, event, link, 'reserved', `the share of the budgets for ${link.childTaskId} is taken`, {
      share: link.share,
    }),
  ];
}

/**
 * The start of the call's child did not happen (refused, or looked up and not found and not sent again): its share
 * goes back to the parent whole, its link says so, and the audit has it (`released`). Nothing changes for a call
 * without a starting link.
 */
export function releaseUnstarted(
  context: AgentContext,
  event: MachineEvent,
  callId: string,
): { context: Pick<AgentContext, 'subtasks' | 'budget'>; audit: AuditEntry[] } {
  const link = context.subtasks.find((l) => l.callId === callId && l.status === 'starting');
  if (!link) return { context: { subtasks: context.subtasks, budget: context.budget }, audit: [] };
  const released: SubtaskLink = { ...link, status: 'not_started' };
  return {
    context: {
      subtasks: context.subtasks.map((l) => (l === link ? released : l)),
      budget: giveBack(context, link.share),
    },
    audit: [
      subtaskEntry(context, event, released, 'released', `${link.childTaskId} did not start: its share went back`, {
        returned: link.share,
      }),
    ],
  };
}
