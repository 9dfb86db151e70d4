/**
 * The fold's step for sub-tasks: the child's share taken from the parent (`reserved`; its money is counted by the
 * `tool_started` entry before it), the parent waiting once the child started, the unspent share given back when
 * the child's outcome came back, and the whole share given back when the start did not happen. See `replayFold.ts` for the rest.
 */
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldMoves } from './replayFoldMoves.js';

export function foldSubtask(entry: Extract<AuditEntry, { kind: 'subtask' }>, moves: FoldMoves): void {
  const { used, enter, decide } = moves;
  decide({
    kind: 'subtask',
    name: entry.action,
    decision: entry.status ?? entry.action,
    code: null,
    summary: entry.summary,
    tool: entry.tool,
    callId: entry.callId,
  });
  if (entry.action === 'reserved' && entry.share) {
    for (const key of ['modelTurns', 'toolCalls', 'writes', 'retries', 'tokens', 'costMicros'] as const)
      used[key] += entry.share[key];
  } else if (entry.action === 'started') {
    enter('executing.awaitingSubtask');
  } else if (entry.action === 'finished') {
    for (const key of Object.keys(used) as (keyof typeof used)[]) used[key] -= entry.returned?.[key] ?? 0;
    enter('executing.selecting');
  } else if (entry.action === 'released') {
    // The start did not happen: the whole share went back (the entry that said so moved the state).
    for (const key of Object.keys(used) as (keyof typeof used)[]) used[key] -= entry.returned?.[key] ?? 0;
  }
}
