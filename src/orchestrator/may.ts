/**
 * What one person may do on a task now, asked of the rules that decide when they act: the host's refusals
 * (`hostRefusal`: tenant, a finished task, current scopes, who may cancel) and the chart's own guards (the
 * confirmation checks in the chart's order, who may reject, who answers). A page offers exactly these controls, so
 * the requester of a four-eyes confirmation is never shown a Confirm that fails `self_approval`, nor an approver a
 * Cancel that fails `wrong_user`; `refused` says why, in the words of the refusal the action would get.
 */
import type { Tool } from '../tool.js';
import type { MachineEvent } from '../../machines/actors.js';
import type { AgentContext, Principal } from '../../machines/context.js';
import { CONFIRMATION_REFUSALS } from '../../machines/failures.js';
import { confirmationGuards, confirmationRefusal } from '../../machines/guards/confirmation.js';
import { modelGuards } from '../../machines/guards/model.js';
import { type HostRules, hostRefusal } from './hostEvents.js';
import type { TaskStatus } from './status.js';

/** The decisions a person takes on a task (stepping and review are the host's own controls). */
export const DECISIONS = ['confirm', 'reject', 'cancel', 'answer'] as const;
export type Decision = (typeof DECISIONS)[number];

/** Why a decision the task's state allows is not this person's to take: the code and message it would get. */
export interface Refused {
  action: Decision;
  code: string;
  message: string;
}

/** Whether `by` may take each decision now (its state allows it and it is theirs), and why not where it is not theirs. */
export type May = Record<Decision, boolean> & { refused: Refused[] };

/**
 * What `by` may do on the task whose status is `status`, at `now`. A decision the task's state does not offer is
 * false with no reason (nobody may take it); one the state offers but the rules refuse to `by` is false with the
 * refusal in `refused`.
 */
export function mayOf(status: TaskStatus, by: Principal, now: number, rules: HostRules): May {
  const may: May = { confirm: false, reject: false, cancel: false, answer: false, refused: [] };
  const check = (action: Decision, refusal: { code: string; message: string } | null) => {
    if (refusal) may.refused.push({ action, ...refusal });
    else may[action] = true;
  };
  if (by.tenantId !== status.principal.tenantId || status.outcome) return may;
  const pending = status.pendingConfirmation;
  // The chart's confirmation guards read the pending confirmation and the principal only.
  const context = {
    principal: status.principal,
    outcome: status.outcome,
    pendingConfirmation: pending,
  } satisfies Partial<AgentContext> as AgentContext;
  if (status.state === 'waiting_for_confirmation' && pending) {
    // The decision as the page would send it: for exactly the arguments shown, under the policy it was asked under.
    const confirmed: MachineEvent = {
      type: 'user.confirmed',
      at: now,
      confirmationId: pending.id,
      argsHash: pending.argsHash,
      userId: by.userId,
      scopes: [...by.scopes],
      policyVersion: pending.policyVersion,
    };
    const refusal = hostRefusal(status, by, confirmed, rules);
    const code = refusal ? null : confirmationRefusal(context, confirmed);
    check('confirm', refusal ?? (code ? { code, message: confirmRefusalText(code, pending.approverScope) } : null));
    const rejected: MachineEvent = {
      type: 'user.rejected',
      at: now,
      confirmationId: pending.id,
      userId: by.userId,
      scopes: [...by.scopes],
      reason: null,
    };
    check(
      'reject',
      confirmationGuards.isRejectionOfPendingConfirmation(context, rejected)
        ? null
        : {
            code: 'wrong_user',
            message: `only ${pending.userId}${pending.approverScope ? ` or a holder of ${pending.approverScope}` : ''} may reject it`,
          },
    );
  }
  if (status.state === 'waiting_for_user') {
    const answered: MachineEvent = { type: 'user.answered', at: now, text: '-', userId: by.userId };
    check(
      'answer',
      modelGuards.isFromTaskUser(context, answered)
        ? null
        : { code: 'wrong_user', message: `only ${status.principal.userId} answers the question of their task` },
    );
  }
  // A held write waits for its reviewer first; every other unfinished state takes a cancel.
  if (status.state !== 'review_required') check('cancel', hostRefusal(status, by, { type: 'task.cancelled' }, rules));
  return may;
}

function confirmRefusalText(code: keyof typeof CONFIRMATION_REFUSALS, approverScope: string | null): string {
  const text = CONFIRMATION_REFUSALS[code].replace(/; it is asked again$/, '');
  return code === 'self_approval' && approverScope ? `${text} (${approverScope})` : text;
}

/**
 * The money (minor units) a call of `tool` with `args` moves, by the tool's `amount` rule: 0 when the tool declares
 * none, null when it is unknown or the arguments do not parse (redacted arguments, for instance).
 */
export function amountOfCall(tool: Tool | undefined, args: unknown): number | null {
  if (!tool) return null;
  if (tool.effect !== 'write' || !tool.amount) return 0;
  const parsed = tool.input.safeParse(args);
  if (!parsed.success) return null;
  try {
    const amount: unknown = tool.amount(parsed.data);
    return typeof amount === 'number' && Number.isSafeInteger(amount) && amount >= 0 ? amount : null;
  } catch {
    return null;
  }
}
