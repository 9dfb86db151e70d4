/**
 * What the step CLI prints: a task's current status, the events allowed now, and the task as it was at step N
 * (replayed from its audit journal). Pure functions from data to text.
 */
import type { BudgetCounters, BudgetLimits, Observation } from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import { formatTrace } from '../audit/formatTrace.js';
import type { ReplayedTask } from '../audit/replayAudit.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { clip, jsonPreview as json } from '../text.js';

export type StepCommand = 'next' | 'confirm' | 'reject' | 'answer' | 'resolve' | 'cancel' | 'at' | 'quit';

/** The commands that make sense now. `modelWaiting`: the task is running and its model waits for `next`. */
export function allowedCommands(status: TaskStatus, modelWaiting: boolean): StepCommand[] {
  if (status.outcome) return ['at', 'quit'];
  if (status.state === 'waiting_for_confirmation') return ['confirm', 'reject', 'cancel', 'at', 'quit'];
  if (status.state === 'waiting_for_user') return ['answer', 'cancel', 'at', 'quit'];
  // A held write is resolved by a reviewer before anything else (a cancel waits for it too).
  if (status.state === 'review_required') return ['resolve', 'at', 'quit'];
  if (status.state === 'waiting_for_model') return ['cancel', 'at', 'quit'];
  return modelWaiting ? ['next', 'cancel', 'at', 'quit'] : ['cancel', 'at', 'quit'];
}

const USAGE: Record<StepCommand, string> = {
  next: 'next',
  confirm: 'confirm',
  reject: 'reject [reason]',
  answer: 'answer <text>',
  resolve: 'resolve happened <result json> | not_happened [note] | retry [note]',
  cancel: 'cancel [reason]',
  at: 'at <N>',
  quit: 'quit',
};

export function formatAllowed(commands: StepCommand[]): string {
  return commands.map((c) => USAGE[c]).join(' · ');
}

export function formatStatus(
  status: TaskStatus,
  extra: { auditLength: number; modelWaiting: boolean; now: number },
): string {
  const { budget, outcome, pendingConfirmation: pending } = status;
  const lines = [
    `task      ${status.taskId} · ${status.state} (${status.stateValue}) · revision ${status.revision} · turn ${status.turn} · ${extra.auditLength} audit entries`,
    `goal      ${status.goal}`,
  ];
  if (status.mandate) lines.push(`mandate   ${status.mandate.kind} ${clip(json(status.mandate.terms), 160)}`);
  // Sub-tasks: the parent this task was started by, and the children it started (step through each by its id).
  if (status.parent)
    lines.push(`parent    ${status.parent.taskId} (its ${status.parent.tool} call ${status.parent.callId})`);
  for (const [i, child] of status.children.entries()) {
    const state = child.outcome ? `${child.outcome.status}: ${child.outcome.code}` : child.status;
    lines.push(`${i === 0 ? 'children  ' : '          '}${child.childTaskId} (${child.tool}) · ${state}`);
  }
  if (pending) {
    const who = pending.approverScope
      ? `by approvers holding ${pending.approverScope}, not ${pending.userId} (${pending.approvals.length} of ${pending.approvalsRequired}${
          pending.approvals.length ? `: ${pending.approvals.map((a) => a.userId).join(', ')}` : ''
        })`
      : `by ${pending.userId}`;
    lines.push(
      `confirm   ${pending.summary}`,
      `          id ${pending.id} · ${who} · args ${pending.argsHash}`,
      `          expires ${new Date(pending.expiresAt).toISOString()} (${describeIn(pending.expiresAt - extra.now)})`,
    );
  }
  if (status.question) {
    const expires =
      status.questionExpiresAt === null ? '' : ` (expires ${describeIn(status.questionExpiresAt - extra.now)})`;
    lines.push(`question  ${status.question}${expires}`);
  }
  if (status.review) {
    lines.push(
      `review    ${status.review.tool} (${status.review.callId}) · ${status.review.reason} · key ${status.review.idempotencyKey ?? '-'}`,
      `          ${status.review.summary}`,
    );
  }
  if (status.outage) {
    lines.push(
      `outage    ${status.outage.attempts} attempt(s) since ${new Date(status.outage.since).toISOString()}; next ${describeIn(status.outage.wakeAt - extra.now)}: ${status.outage.lastError}`,
    );
  }
  lines.push(`budget    ${formatBudget(budget.used, budget.limits)}`);
  lines.push(...formatObservations(status.observations));
  if (outcome) {
    lines.push(`outcome   ${outcome.status}: ${outcome.reason.code} (${outcome.reason.message})`);
    if (outcome.answer) lines.push(`answer    ${outcome.answer}`);
  } else if (extra.modelWaiting) {
    lines.push('model     its turn waits for you: `next` lets it decide (tools and gates then run as usual)');
  }
  return lines.join('\n');
}

/** `used/limit` per dimension, on one line. */
export function formatBudget(used: BudgetCounters, limits: BudgetLimits | null): string {
  return (Object.keys(used) as (keyof BudgetCounters)[])
    .map((key) => `${key} ${used[key]}${limits ? `/${limits[key]}` : ''}`)
    .join(' · ');
}

function formatObservations(observations: Observation[]): string[] {
  if (observations.length === 0) return ['last      (no results in the current batch)'];
  return observations.map((o, i) => {
    const head = i === 0 ? 'last      ' : '          ';
    return o.ok
      ? `${head}${o.tool} ok ${clip(json(o.data), 140)}`
      : `${head}${o.tool} ${o.code}: ${clip(o.summary, 140)}`;
  });
}

/** The task at step N of its journal, as `at N` prints it. */
export function formatReplay(replayed: ReplayedTask, entries: readonly AuditEntry[]): string {
  const n = replayed.step;
  const lines = [
    `at ${n} of ${entries.length} (the task after its first ${n} audit entr${n === 1 ? 'y' : 'ies'}; at 0 is before it started)`,
    `  state     ${replayed.state ?? (n === 0 ? '(not started)' : '(not recorded: an entry written before transitions were)')} · ${replayed.status} · turn ${replayed.turn}`,
    `  budget    ${formatBudget(replayed.budget.used, replayed.budget.limits)}`,
  ];
  const pending = replayed.pendingConfirmation;
  lines.push(
    pending
      ? `  pending   ${pending.id} for ${pending.tool} · args ${pending.argsHash} · expires ${pending.expiresAt === null ? '?' : new Date(pending.expiresAt).toISOString()}`
      : '  pending   (no confirmation pending)',
  );
  if (replayed.waitingForAnswer) lines.push('  question  the model asked the user (the text is in the transcript)');
  if (replayed.lastResults.length === 0) lines.push('  results   (none in the current batch)');
  for (const [i, c] of replayed.lastResults.entries()) {
    const result =
      c.result !== null
        ? c.gate
          ? `${c.result} (${c.gate} gate)`
          : c.result
        : c.effect === null
          ? 'not run yet'
          : 'running';
    lines.push(
      `  ${i === 0 ? 'results   ' : '          '}${c.tool} ${c.args === null ? '' : `${clip(json(c.args), 100)} `}→ ${result}`,
    );
  }
  if (replayed.outcome) lines.push(`  outcome   ${replayed.outcome.status}: ${replayed.outcome.reason.code}`);
  lines.push(`  path      ${replayed.visited.join(' → ') || '(none)'}`);
  // The transitions the last entry recorded: event, guard, and where they went.
  const last = replayed.transitions.filter((t) => t.seq === n - 1);
  for (const [i, t] of last.entries())
    lines.push(
      `  ${i === 0 ? 'moved     ' : '          '}${t.from} → ${t.to} on ${t.event}${t.guard ? ` [${t.guard}]` : ''}${t.edge === null ? '' : ` (#${t.edge})`}`,
    );
  lines.push('  decisions');
  const trace = formatTrace(entries.slice(0, n), { indent: '    ', verbose: true });
  lines.push(trace || '    (none)');
  return lines.join('\n');
}

function describeIn(ms: number): string {
  if (ms <= 0) return 'expired';
  const minutes = Math.round(ms / 60_000);
  return minutes >= 1 ? `in ${minutes} min` : `in ${Math.ceil(ms / 1000)} s`;
}
