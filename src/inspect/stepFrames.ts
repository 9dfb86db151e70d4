/**
 * Time travel in the Stately inspector: the task as it was after its first N audit entries (`replayAudit`), as the
 * frames the inspector reads. The snapshot goes to the task's own actor (`task:<taskId>`), so stepping back and
 * forth through a persisted task moves the highlighted state in the chart the inspector already shows; when the
 * inspector has not seen the task in this process, an actor frame with the chart's definition comes first.
 */
import { createAgentMachine } from '../../machines/agentMachine.js';
import { emptyToolkit } from '../../machines/toolkit.js';
import type { ReplayedTask } from '../audit/replayAudit.js';
import { inspectorDefinition } from './inspectorDefinition.js';
import { STATELY_VERSION } from './statelyFrames.js';

let chartDefinition: string | null = null;

/** The agent chart's definition as the inspector reads it (built once). */
export function agentChartDefinition(): string {
  chartDefinition ??= inspectorDefinition(createAgentMachine(emptyToolkit()).config);
  return chartDefinition;
}

/** `executing.awaitingConfirmation` → `{ executing: 'awaitingConfirmation' }`, as XState writes a state value. */
export function stateValueOf(path: string | null): unknown {
  if (path === null) return null;
  const [head, ...rest] = path.split('.');
  return rest.length === 0 ? head : { [head!]: stateValueOf(rest.join('.')) };
}

/** The actor frame that introduces a task to the inspector. */
export function taskActorFrame(taskId: string, at: number): Record<string, unknown> {
  const sessionId = `task:${taskId}`;
  return {
    type: '@xstate.actor',
    sessionId,
    rootId: sessionId,
    _version: STATELY_VERSION,
    createdAt: String(at),
    name: taskId,
    id: null,
    definition: agentChartDefinition(),
    snapshot: { status: 'active' },
  };
}

/** The snapshot of step N: its state, and the same reduced context the live frames carry. */
export function stepSnapshotFrame(taskId: string, replayed: ReplayedTask, at: number): Record<string, unknown> {
  const sessionId = `task:${taskId}`;
  const pending = replayed.pendingConfirmation;
  return {
    type: '@xstate.snapshot',
    sessionId,
    rootId: sessionId,
    _version: STATELY_VERSION,
    createdAt: String(at),
    id: null,
    event: { type: 'inspect.step', step: replayed.step },
    snapshot: {
      status: replayed.outcome ? 'done' : 'active',
      value: stateValueOf(replayed.state),
      context: {
        taskId,
        step: replayed.step,
        turn: replayed.turn,
        budgetUsed: replayed.budget.used,
        pendingConfirmation: pending
          ? { id: pending.id, tool: pending.tool, argsHash: pending.argsHash, expiresAt: pending.expiresAt }
          : null,
        batch: {
          calls: replayed.lastResults.map((call) => ({
            callId: call.callId,
            tool: call.tool,
            result: call.result,
            gate: call.gate,
          })),
        },
        outcome: replayed.outcome ? { status: replayed.outcome.status, code: replayed.outcome.reason.code } : null,
      },
    },
  };
}
