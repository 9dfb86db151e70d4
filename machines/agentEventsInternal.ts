/**
 * Every event the agent machine can see: the external vocabulary plus the done/error events of its invoked
 * actors. Guards and steps take this union; `eventTime` reads the host time every event carries.
 */
import type {
  LookupActorOutput,
  ModelActorOutput,
  ReadsActorOutput,
  VetActorOutput,
  WriteActorOutput,
} from './actorContracts.js';
import type { AgentEvent } from './agentEvents.js';

export type DoneEvent<Id extends string, Output> = { type: `xstate.done.actor.${Id}`; output: Output };
export type ErrorEvent<Id extends string> = { type: `xstate.error.actor.${Id}`; error: unknown };

export type AnyAgentEvent =
  | AgentEvent
  | DoneEvent<'model', ModelActorOutput>
  | DoneEvent<'vet', VetActorOutput>
  | DoneEvent<'reads', ReadsActorOutput>
  | DoneEvent<'write', WriteActorOutput>
  | DoneEvent<'lookup', LookupActorOutput>
  | ErrorEvent<'model' | 'vet' | 'reads' | 'write' | 'lookup'>
  | { type: 'xstate.init'; input?: { startedAt?: number } };

/** Host time of an event: `at` on external events, `output.at` on our actors' done events. */
export function eventTime(event: AnyAgentEvent, fallback: number): number {
  if ('at' in event && typeof event.at === 'number') return event.at;
  if ('output' in event && event.output && typeof event.output.at === 'number') return event.output.at;
  return fallback;
}

interface ActorOutputs {
  model: ModelActorOutput;
  vet: VetActorOutput;
  reads: ReadsActorOutput;
  write: WriteActorOutput;
  lookup: LookupActorOutput;
}

/** The output of one of our invoked actors' done events; throws if `event` is not that done event. */
export function outputOf<Id extends keyof ActorOutputs>(event: AnyAgentEvent, id: Id): ActorOutputs[Id] {
  if (event.type !== `xstate.done.actor.${id}`) {
    throw new Error(`expected the done event of actor "${id}", got "${event.type}"`);
  }
  return (event as unknown as { output: ActorOutputs[Id] }).output;
}
