/**
 * The frames the Stately inspector reads, built from the offline inspection stream's messages rather than from
 * XState's raw inspection events: the same reduced context (turn, budgets used, pending confirmation, batch,
 * outcome), events reduced to their type and identifiers, and one stable actor id per task (`task:<taskId>`, its
 * children `task:<taskId>/<invoke id>`), so a task that is evicted while it waits and reloaded stays one actor.
 */
import type { InspectionEvent } from 'xstate';
import type { Principal } from '../../machines/context.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { type InspectionMessage, createInspectionStream } from './inspectionStream.js';
import { inspectorDefinition } from './inspectorDefinition.js';

/** The fields of an event the inspector shows: its type and its identifiers, never inputs, outputs or free text. */
const EVENT_FIELDS = ['actorId', 'confirmationId', 'callId', 'tool', 'argsHash', 'userId', 'at'];

function reducedEvent(event: { type: string; [field: string]: unknown } | undefined): Record<string, unknown> {
  if (!event) return { type: '' };
  const reduced: Record<string, unknown> = { type: event.type };
  for (const field of EVENT_FIELDS)
    if (typeof event[field] === 'string' || typeof event[field] === 'number') reduced[field] = event[field];
  return reduced;
}

/** Whose a task is and who waits on it: what a relay needs to send a task's frames only to the viewers who may see it. */
export type TaskAccessFacts = { principal: Principal } & Pick<TaskStatus, 'pendingConfirmation'>;

/** The task a frame belongs to (null for an actor that is no task's) and, once known, who may see it. */
export interface FrameTask {
  taskId: string | null;
  access: TaskAccessFacts | null;
}

/** The Stately inspector's protocol version these frames follow (@statelyai/inspect 0.7). */
export const STATELY_VERSION = '0.7.2';

/**
 * Turns XState inspection events into the Stately inspector's frames, by way of the offline stream's messages (the
 * reduced context, bounded events), with one stable actor id per task (see the header).
 */
export function statelyFrames(
  send: (frame: Record<string, unknown>, task: FrameTask) => void,
): (event: InspectionEvent) => void {
  // The root's definition, which the inspector draws the chart from: read from the actor's logic, once per machine,
  // with every guard kept by name (composed guards are functions; see inspectorDefinition.ts).
  const definitions = new WeakMap<object, string>();
  const definitionOf = new Map<string, string>();
  const stableIds = new Map<string, string>();
  // Each task's owner and pending confirmation, from its root actor's input and snapshots (never sent in a frame).
  const accessOf = new Map<string, TaskAccessFacts>();
  // A sub-task's root actor, by session: the parent task it belongs to, so the inspector draws it as the parent's child.
  const parentOf = new Map<string, string>();
  const stableId = (message: InspectionMessage) => {
    const id =
      message.taskId === null
        ? message.sessionId
        : message.root
          ? `task:${message.taskId}`
          : `task:${message.taskId}/${message.actorId}`;
    stableIds.set(message.sessionId, id);
    return id;
  };
  const stream = createInspectionStream((message) => {
    const sessionId = stableId(message);
    const rootId = message.taskId === null ? (message.root ? sessionId : null) : `task:${message.taskId}`;
    const base = { sessionId, rootId, _version: STATELY_VERSION, createdAt: String(message.at) };
    const task: FrameTask = {
      taskId: message.taskId,
      access: message.taskId === null ? null : (accessOf.get(message.taskId) ?? null),
    };
    const snapshot = message.snapshot
      ? {
          status: message.snapshot.status === 'active' ? 'active' : message.snapshot.status,
          value: message.snapshot.value,
          context: message.snapshot.context ?? null,
        }
      : undefined;
    switch (message.type) {
      case '@xstate.actor':
        send(
          {
            ...base,
            type: '@xstate.actor',
            name: message.root ? (message.taskId ?? sessionId) : message.actorId,
            parentId:
              message.parentId === null
                ? parentOf.get(message.sessionId)
                : (stableIds.get(message.parentId) ?? message.parentId),
            id: null,
            definition: message.root ? definitionOf.get(message.sessionId) : undefined,
            snapshot: { status: 'active' },
          },
          task,
        );
        definitionOf.delete(message.sessionId);
        parentOf.delete(message.sessionId);
        break;
      case '@xstate.event':
        send(
          {
            ...base,
            type: '@xstate.event',
            event: reducedEvent(message.event),
            sourceId: message.sourceId ? (stableIds.get(message.sourceId) ?? message.sourceId) : undefined,
            id: String(message.seq),
          },
          task,
        );
        break;
      case '@xstate.snapshot':
        send({ ...base, type: '@xstate.snapshot', event: reducedEvent(message.event), snapshot, id: null }, task);
        break;
      default:
        break;
    }
  });
  return (event) => {
    if (event.actorRef.sessionId === event.rootId) rememberAccess(event, accessOf);
    if (event.type === '@xstate.actor' && event.actorRef.sessionId === event.rootId) {
      const logic = (event.actorRef as { logic?: { config?: unknown } }).logic;
      if (logic?.config) {
        let definition = definitions.get(logic);
        if (definition === undefined) {
          definition = inspectorDefinition(logic.config);
          definitions.set(logic, definition);
        }
        definitionOf.set(event.actorRef.sessionId, definition);
      }
      const parent = parentTaskOf(event.actorRef);
      if (parent) parentOf.set(event.actorRef.sessionId, `task:${parent}`);
    }
    stream(event);
  };
}

/** The parent task of a sub-task's root actor: from the input it starts with, or the snapshot it is restored from. */
function parentTaskOf(actor: unknown): string | null {
  const options = (actor as { options?: { input?: unknown; snapshot?: unknown } }).options;
  const input = options?.input as { parent?: { taskId?: unknown } } | undefined;
  const restored = (options?.snapshot as { context?: { parent?: { taskId?: unknown } | null } } | undefined)?.context;
  const taskId = input?.parent?.taskId ?? restored?.parent?.taskId;
  return typeof taskId === 'string' ? taskId : null;
}

/** Reads a root actor's owner and pending confirmation off its `xstate.init` input or its snapshot's context. */
function rememberAccess(event: InspectionEvent, facts: Map<string, TaskAccessFacts>): void {
  let source: { taskId?: unknown; principal?: unknown; pendingConfirmation?: unknown } | undefined;
  if (event.type === '@xstate.snapshot') source = (event.snapshot as { context?: typeof source }).context;
  else if (event.type === '@xstate.event' && event.event.type === 'xstate.init')
    source = (event.event as { input?: typeof source }).input;
  if (!source || typeof source.taskId !== 'string' || !source.principal || typeof source.principal !== 'object') return;
  facts.set(source.taskId, {
    principal: source.principal as Principal,
    pendingConfirmation: (source.pendingConfirmation ?? null) as TaskAccessFacts['pendingConfirmation'],
  });
}
