/**
 * The fold's step for sub-tasks, data only: the child's share taken from the parent (`reserved`; its money is counted
 * by the `tool_started` entry before it), the unspent share given back when the child's outcome came back
 * (`finished`, and what it spent above the share charged), and the whole share given back when the start did not happen (`released`). The states come from the
 * recorded transitions, as for every entry. See `replayFold.ts` for the rest.
 */
import type { BudgetCounters } from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldHelpers } from './replayFoldHelpers.js';

const COUNTERS = ['modelTurns', 'toolCalls', 'writes', 'retries', 'tokens', 'costMicros', 'money'] as const;

export function foldSubtask(entry: Extract<AuditEntry, { kind: 'subtask' }>, { used, decide }: FoldHelpers): void {
  decide({
    kind: 'subtask',
    name: entry.action,
    decision: entry.status ?? entry.action,
    code: null,
    summary: entry.summary,
    tool: entry.tool,
    callId: entry.callId,
  });
  const add = (amounts: BudgetCounters | undefined, sign: number, skip?: keyof BudgetCounters) => {
    for (const key of COUNTERS) if (key !== skip) used[key] += sign * (amounts?.[key] ?? 0);
  };
  if (entry.action === 'reserved') add(entry.share, 1, 'money');
  else if (entry.action === 'finished' || entry.action === 'released') {
    add(entry.returned, -1);
    // What the child spent above its share is the parent's too.
    add(entry.charged, 1);
  }
}
