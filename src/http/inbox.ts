/**
 * The approval inbox: the confirmations a caller may decide, each with what will run, who asked and when, the time
 * left, the money at stake, the mandate it must stay within, why it was asked (reasons and risk class), and what differs from the earlier proposals of the same tool in the task (the model asked for 999.00,
 * refused by the mandate; it asks for 199.00 now). Earlier proposals come from the transcript (what the model
 * proposed, and what became of it); they are shown only on the fields the tool shows approvers, and a field the
 * tool redacts stays redacted.
 */
import type { Principal } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import type { Orchestrator, TaskStatus } from '../orchestrator/orchestrator.js';
import { decidesPending } from './access.js';
import type { EarlierProposal, InboxItem } from './schemas.js';

const REDACTED = '(redacted)';

/** The inbox entry of a task whose pending confirmation `principal` decides, or null. */
export async function inboxItem(
  orchestrator: Orchestrator,
  principal: Principal,
  status: TaskStatus,
  now: number,
): Promise<InboxItem | null> {
  const pending = status.pendingConfirmation;
  const decideAs = decidesPending(principal, status);
  if (!pending || !decideAs || status.state !== 'waiting_for_confirmation') return null;
  const transcript = await orchestrator.transcript(status.taskId);
  const may = orchestrator.may(status, principal);
  const limit = status.budget.limits.money;
  return {
    taskId: status.taskId,
    goal: status.goal,
    confirmationId: pending.id,
    tool: pending.tool,
    args: pending.args,
    argsHash: pending.argsHash,
    summary: pending.summary,
    requestedBy: pending.userId,
    requestedAt: pending.requestedAt,
    expiresAt: pending.expiresAt,
    timeLeftMs: Math.max(0, pending.expiresAt - now),
    decideAs,
    approverScope: pending.approverScope,
    approvals: { given: pending.approvals.length, required: pending.approvalsRequired },
    reasons: pending.reasons,
    risk: pending.risk,
    money: {
      amount: orchestrator.amountOf(pending.tool, pending.args),
      used: status.budget.used.money,
      limit: Number.isFinite(limit) ? limit : null,
    },
    mandate: status.mandate ? { kind: status.mandate.kind, terms: status.mandate.terms } : null,
    may: {
      confirm: may.confirm,
      reject: may.reject,
      refused: may.refused.filter((r) => r.action === 'confirm' || r.action === 'reject'),
    },
    earlier: earlierProposals(transcript, pending.tool, pending.callId, pending.args),
  };
}

/** Earlier proposals of `tool` in the transcript, oldest first, compared field by field with the pending call. */
export function earlierProposals(
  transcript: readonly TranscriptEntry[],
  tool: string,
  pendingCallId: string,
  shown: unknown,
): EarlierProposal[] {
  const results = new Map<string, { result: string; summary: string | null }>();
  for (const entry of transcript) {
    if (entry.kind !== 'result') continue;
    const o = entry.observation;
    results.set(o.callId, o.ok ? { result: 'ok', summary: null } : { result: o.code, summary: o.summary });
  }
  const proposals = transcript.flatMap((entry) =>
    entry.kind === 'proposal'
      ? entry.calls.filter((c) => c.tool === tool).map((call) => ({ call, turn: entry.turn }))
      : [],
  );
  const pendingRaw = objectOf(parse(proposals.find((p) => p.call.callId === pendingCallId)?.call.arguments));
  const now = objectOf(shown);
  return proposals
    .filter((p) => p.call.callId !== pendingCallId)
    .map(({ call, turn }) => {
      const raw = objectOf(parse(call.arguments));
      // Only the fields the approver is shown; a field whose shown value is not its raw one is redacted by the tool.
      const args: Record<string, unknown> = {};
      for (const field of Object.keys(now)) {
        if (!(field in raw)) continue;
        args[field] = same(pendingRaw[field], now[field]) ? raw[field] : REDACTED;
      }
      const differences = Object.keys(now)
        .filter((field) => args[field] !== REDACTED && !same(args[field], now[field]))
        .map((field) => ({ field, was: field in args ? args[field] : null, now: now[field] }));
      const outcome = results.get(call.callId);
      return {
        callId: call.callId,
        turn,
        args,
        result: outcome?.result ?? null,
        summary: outcome?.summary ?? null,
        differences,
      };
    });
}

function parse(text: string | undefined): unknown {
  if (text === undefined) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function objectOf(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
