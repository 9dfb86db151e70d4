/** Checks that a persisted snapshot can be restored into this build's machine without getting stuck. */
import type { AgentMachine } from '../../machines/agentMachine.js';
import { ACTORS } from '../../machines/actors.js';
import type { TaskEnvelope } from '../store/envelope.js';
import { stateValueToString } from '../store/summary.js';

const KNOWN_ACTORS: ReadonlySet<string> = new Set(Object.values(ACTORS));

/** The reason a snapshot cannot be restored safely, or null when it can. */
export function unrestorableReason(machine: AgentMachine, envelope: TaskEnvelope): string | null {
  const { snapshot } = envelope;
  if (snapshot.status === 'error') return 'the snapshot records a machine error';
  if (snapshot.status === 'stopped') return 'the snapshot is of a stopped actor';
  if (!valueExists(machine.root, snapshot.value)) {
    return `state "${stateValueToString(snapshot.value)}" does not exist in machine ${machine.id}`;
  }
  for (const [id, child] of Object.entries(snapshot.children ?? {})) {
    const src = (child as { src?: unknown })?.src;
    if (typeof src !== 'string' || !KNOWN_ACTORS.has(src)) {
      return `in-flight invocation ${id} refers to actor ${JSON.stringify(src)}, which this build does not provide`;
    }
  }
  return null;
}

interface NodeLike {
  states: Record<string, NodeLike>;
}

function valueExists(node: NodeLike, value: unknown): boolean {
  if (typeof value === 'string') return Object.hasOwn(node.states, value);
  if (!value || typeof value !== 'object') return false;
  const entries = Object.entries(value);
  if (entries.length === 0) return false;
  return entries.every(([key, inner]) => Object.hasOwn(node.states, key) && valueExists(node.states[key]!, inner));
}

interface DecidingNode {
  states: Record<string, DecidingNode>;
  always?: readonly unknown[];
}

/**
 * True when a state of `value` decides at once (has eventless transitions): XState takes them on the next event
 * only, so a task restored there is sent one (`task.restored`). Only a migration stores a task in such a state.
 */
export function decidesAtOnce(machine: AgentMachine, value: unknown): boolean {
  const walk = (node: DecidingNode, inner: unknown): boolean => {
    if (typeof inner === 'string') return (node.states[inner]?.always?.length ?? 0) > 0;
    if (!inner || typeof inner !== 'object') return false;
    return Object.entries(inner).some(([key, next]) => {
      const child = node.states[key];
      return child !== undefined && ((child.always?.length ?? 0) > 0 || walk(child, next));
    });
  };
  return walk(machine.root as unknown as DecidingNode, value);
}
