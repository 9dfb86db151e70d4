/**
 * The tool's own synchronous rules, asked of one call: who must confirm it, whether it fits the task's mandate, how
 * much money it moves. Pure; each host function gets its own copy of the validated arguments, and a rule that
 * throws, returns a promise or returns something odd fails closed (it asks, refuses, or stops).
 *
 * Who must confirm is the tool's rule raised by floors it cannot lower: its risk class, the money it moves (above
 * what the host lets run unconfirmed), and the Rule of Two. A write without a rule is confirmed by default.
 */
import type {
  AgentContext,
  CallState,
  ConfirmationReason,
  ConfirmationRequirement,
  Decision,
  RiskClass,
} from '../context.js';
import type { ApprovalRule, TaskFacts, ToolRules } from '../toolkit.js';
import { checkArguments, copyOf } from './arguments.js';
import { canonicalJson } from './canonicalJson.js';
import { cap, safeErrorText } from './text.js';

/** What the task did so far, as the rules see it. */
export function taskFacts(context: AgentContext): TaskFacts {
  return { moneyMoved: context.budget.used.money, writesStarted: context.budget.used.writes };
}

export interface ConfirmationNeed {
  requirement: ConfirmationRequirement | null;
  summary: string | null;
}

/** The risk class of `call`'s tool: as it declares, else `read_only` for a read and `writable` for a write. */
export function riskOf(call: Pick<CallState, 'effect'>, rules: ToolRules | undefined): RiskClass {
  return rules?.risk ?? (call.effect === 'write' ? 'writable' : 'read_only');
}

/**
 * The reason a write's tool gave for running without a confirmation (`confirm: { never: reason }`), if it did. A
 * waiver beside anything else (an approver scope) is not one: that rule asks.
 */
export function confirmationWaiver(rules: ToolRules | undefined): string | null {
  const rule = rules?.confirm as { never?: unknown } | undefined;
  if (!rule || typeof rule !== 'object' || Object.keys(rule).some((key) => key !== 'never')) return null;
  return typeof rule.never === 'string' && rule.never.trim() !== '' ? rule.never : null;
}

/** Why a call runs without a confirmation, as the audit says it: the tool's written waiver, or its rule. */
export function unconfirmedSummary(rules: ToolRules | undefined): string {
  const waiver = confirmationWaiver(rules);
  return waiver !== null
    ? `runs unconfirmed, as its tool declares: ${waiver}`
    : "no confirmation: the tool's rule did not ask for these arguments";
}

/** The Rule of Two holds for the task: it saw untrusted input and holds sensitive data, and the host did not turn it off. */
export function isRuleOfTwoMet(context: AgentContext): boolean {
  return (
    context.policy.ruleOfTwo === 'confirm' &&
    context.exposure.untrustedInput !== null &&
    context.exposure.sensitiveData !== null
  );
}

/** Who must confirm `call`, by the tool's rule over its validated arguments and the floors, and the line shown. */
export function confirmationNeed(
  context: AgentContext,
  call: CallState,
  rules: ToolRules | undefined,
): ConfirmationNeed {
  const decided = decide(context, call, rules);
  const requirement = requirementFor(context, call, rules, decided);
  if (requirement === null) return { requirement: null, summary: null };
  if (decided.failed !== null)
    return { requirement, summary: `${call.tool} (confirmation rule failed: ${decided.failed})` };
  const check = checkArguments(call.tool, rules, call.args, context);
  let summary: string;
  try {
    summary = cap(
      String(
        (check.ok && rules?.describeConfirmation?.(copyOf(check.parsed))) ||
          `${call.tool} ${canonicalJson(call.redactedArgs)}`,
      ),
      1_000,
    );
  } catch (error) {
    summary = `${call.tool} (describing the confirmation failed: ${safeErrorText(error)})`;
  }
  return { requirement, summary };
}

/**
 * The rule decided something usable: `false`, `true`, or an approval rule with a scope and a whole number of
 * approvals (1 to 16). A throw, a promise or anything else is not a decision: the call is refused.
 */
export function isConfirmationRuleSound(context: AgentContext, call: CallState, rules: ToolRules | undefined): boolean {
  const decided = decide(context, call, rules);
  if (decided.failed !== null) return false;
  const value = decided.value as { approverScope?: unknown; approvals?: unknown } | boolean | null | undefined;
  if (typeof value === 'boolean') return true;
  if (!value || typeof value !== 'object' || value instanceof Promise) return false;
  const { approverScope, approvals } = value;
  return (
    typeof approverScope === 'string' &&
    approverScope !== '' &&
    (approvals === undefined ||
      (Number.isInteger(approvals) && (approvals as number) >= 1 && (approvals as number) <= 16))
  );
}

/** Only the requirement, without describing it (for the re-check before a write, which shows nobody anything). */
export function confirmationRequirement(
  context: AgentContext,
  call: CallState,
  rules: ToolRules | undefined,
): ConfirmationRequirement | null {
  return requirementFor(context, call, rules, decide(context, call, rules));
}

interface Decided {
  value: unknown;
  failed: string | null;
  /** The tool declares no rule: the write's default applies. */
  byDefault: boolean;
}

/**
 * The rule's raw answer; anything but a plain `false` asks. A throw is reported, never propagated. A write without a
 * rule asks (its default); a write whose rule is a bare `'never'` (no reason given) asks too.
 */
function decide(context: AgentContext, call: CallState, rules: ToolRules | undefined): Decided {
  const check = checkArguments(call.tool, rules, call.args, context);
  const write = call.effect === 'write';
  try {
    if (!rules || !check.ok) throw new Error('the arguments no longer validate');
    const rule: unknown = rules.confirm ?? (write ? 'always' : 'never');
    const byDefault = rules.confirm === undefined || (write && rule === 'never');
    if (confirmationWaiver(rules) !== null) return { value: false, failed: null, byDefault: false };
    let decided: unknown = rule === 'always' ? true : rule === 'never' ? !!write : rule;
    // Each host function gets its own copy: one that changes its argument cannot change what another sees.
    if (typeof rule === 'function') decided = rule(copyOf(check.parsed), copyOf(context.principal), taskFacts(context));
    // A promise is never awaited here (a rule is synchronous): it asks, and its rejection is not left unhandled.
    if (decided instanceof Promise) decided.catch(() => {});
    return { value: decided, failed: null, byDefault };
  } catch (error) {
    return { value: true, failed: safeErrorText(error), byDefault: false };
  }
}

/** The tool's decision raised by the floors: its risk class, the money it moves, the Rule of Two. */
function requirementFor(
  context: AgentContext,
  call: CallState,
  rules: ToolRules | undefined,
  decided: Decided,
): ConfirmationRequirement | null {
  const reasons: ConfirmationReason[] = [];
  let approval = approvalOf(decided.failed === null ? decided.value : null);
  // Anything but a plain `false` asks (a throw, a promise, an odd value fail closed).
  if (decided.value !== false || decided.failed !== null) {
    reasons.push(decided.byDefault ? 'write_default' : 'tool_rule');
  }
  const risk = riskOf(call, rules);
  if (risk === 'irreversible') reasons.push('irreversible');
  if (risk === 'high_risk') {
    reasons.push('high_risk');
    approval ??= context.policy.highRiskApproval;
  }
  if (call.effect === 'write') {
    const amount = amountOf(context, call, rules);
    // A rule that cannot say how much moves is taken to move money (the budget gate refuses it anyway).
    if (amount === null || (amount > 0 && amount + context.budget.used.money > context.policy.unconfirmedMoneyUpTo))
      reasons.push('moves_money');
    if (isRuleOfTwoMet(context)) reasons.push('rule_of_two');
  }
  if (reasons.length === 0) return null;
  const policy = {
    onReject: rules?.confirmation?.onReject ?? 'replan',
    onExpiry: rules?.confirmation?.onExpiry ?? 'ask_again',
  } as const;
  if (approval !== null)
    return { approverScope: approval.approverScope, approvals: approval.approvals ?? 1, ...policy, reasons, risk };
  return { approverScope: null, approvals: 1, ...policy, reasons, risk };
}

/** An approval rule the tool's rule returned, its count kept within 1..16 (an impossible count asks for the most). */
function approvalOf(decided: unknown): ApprovalRule | null {
  const approval = decided as { approverScope?: unknown; approvals?: unknown } | null;
  if (
    !approval ||
    typeof approval !== 'object' ||
    typeof approval.approverScope !== 'string' ||
    approval.approverScope === ''
  )
    return null;
  const approvals = approval.approvals ?? 1;
  const count =
    typeof approvals === 'number' && Number.isInteger(approvals) ? Math.min(Math.max(approvals, 1), 16) : 16;
  return { approverScope: approval.approverScope, approvals: count };
}

/** True when `decisions` satisfy `requirement`: the requester's one, or enough distinct approvers with the scope. */
export function decisionsSatisfy(
  requirement: ConfirmationRequirement,
  decisions: readonly Decision[],
  requester: string,
): boolean {
  if (requirement.approverScope === null) return decisions.some((d) => d.as === 'requester' && d.userId === requester);
  const approvers = new Set(
    decisions
      .filter((d) => d.as === 'approver' && d.scope === requirement.approverScope && d.userId !== requester)
      .map((d) => d.userId),
  );
  return approvers.size >= requirement.approvals;
}

export type MandateCheck = { ok: true; summary: string } | { ok: false; code: string; summary: string };

/** Whether `call` fits the task's mandate, by the tool's rule. Without a mandate every call fits. */
export function mandateCheck(context: AgentContext, call: CallState, rules: ToolRules | undefined): MandateCheck {
  const { mandate } = context;
  if (mandate === null) return { ok: true, summary: 'the task has no mandate' };
  // Derived by the host from a trusted result of a write the mandate admitted, never proposed by the model.
  if (context.unwinding !== null)
    return { ok: true, summary: 'a compensation of a write this task made under its mandate' };
  const check = checkArguments(call.tool, rules, call.args, context);
  if (!rules || !check.ok)
    return {
      ok: false,
      code: 'mandate_unchecked',
      summary: 'the arguments do not validate, so they cannot be checked against the mandate',
    };
  if (!rules.mandate) {
    // A read's result claims the goal met when it is the success criterion's tool: it must be about this request.
    if (rules.effect === 'read' && context.success?.tool === call.tool)
      return {
        ok: false,
        code: 'mandate_unchecked',
        summary: `${call.tool} is the task's success criterion and declares no rule against the user's mandate (${mandate.kind}), so its result could not show this request's goal met`,
      };
    if (rules.effect === 'read') return { ok: true, summary: `${call.tool} reads only and declares no mandate rule` };
    return {
      ok: false,
      code: 'mandate_unchecked',
      summary: `${call.tool} declares no rule against the user's mandate (${mandate.kind}), so this write is not covered by it`,
    };
  }
  try {
    const verdict = rules.mandate(copyOf(check.parsed), copyOf(mandate), taskFacts(context)) as unknown;
    if (verdict instanceof Promise) verdict.catch(() => {});
    const v = verdict as { ok?: unknown; code?: unknown; summary?: unknown } | null;
    if (v?.ok === true) return { ok: true, summary: `within the mandate (${mandate.kind})` };
    const code = typeof v?.code === 'string' && v.code !== '' ? v.code : 'outside_mandate';
    const summary =
      typeof v?.summary === 'string'
        ? cap(v.summary)
        : `the rule did not return { ok: true } for the mandate (${mandate.kind})`;
    return { ok: false, code, summary };
  } catch (error) {
    return {
      ok: false,
      code: 'mandate_check_failed',
      summary: `the mandate rule of ${call.tool} failed (${safeErrorText(error)})`,
    };
  }
}

/** Money `call` moves (minor units), 0 when its tool declares none, null when the rule failed or is not a count. */
export function amountOf(context: AgentContext, call: CallState, rules: ToolRules | undefined): number | null {
  if (!rules?.amount) return 0;
  const check = checkArguments(call.tool, rules, call.args, context);
  if (!check.ok) return null;
  try {
    const amount: unknown = rules.amount(copyOf(check.parsed));
    return typeof amount === 'number' && Number.isSafeInteger(amount) && amount >= 0 ? amount : null;
  } catch {
    return null;
  }
}
