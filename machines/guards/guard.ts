/** The shape every guard has: a pure question over the context, the event, and the host's tool definitions. */
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import type { Toolkit } from '../toolkit.js';

export type Guard = (context: AgentContext, event: MachineEvent, toolkit: Toolkit) => boolean;

export function eventOf<T extends MachineEvent['type']>(
  event: MachineEvent,
  type: T,
): Extract<MachineEvent, { type: T }> {
  if (event.type !== type) throw new Error(`expected ${type}, got ${event.type}`);
  return event as Extract<MachineEvent, { type: T }>;
}
