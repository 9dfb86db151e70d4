/**
 * The agent machine every orchestrator of this process drives its tasks on: built once, on first use. Building it
 * (the chart's setup, XState's state nodes twice over for `provide`, the transition tokens) allocates about 1.4 MB
 * and takes milliseconds; per orchestrator, that was what a restarted worker paid before its first resume, and the
 * young objects it left made the collections during that resume long and frequent.
 *
 * What differs between orchestrators is routed (`machineRoute.ts`): the toolkit the gates read, and the invoked
 * actors, each resolved from the route of the task whose actor runs. The chart itself does not depend on the tools.
 */
import type { AnyActorLogic, AnyActorRef } from 'xstate';
import { fromPromise } from 'xstate';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import type { Toolkit } from '../../machines/toolkit.js';
import type { RuntimeActors } from './actors/index.js';
import { activeRoute } from './machineRoute.js';

/** The toolkit of the task whose actor runs (every member read when asked, as the orchestrator's own). */
const routedToolkit: Toolkit = {
  rules: (name) => activeRoute().toolkit.rules(name),
  get offer() {
    return activeRoute().toolkit.offer;
  },
  workflow: (name) => activeRoute().toolkit.workflow?.(name),
  sha256: (text) => activeRoute().toolkit.sha256(text),
};

/**
 * The actor `key` of the task whose actor runs: its logic is resolved when the invocation starts (inside the
 * parent's run) and kept for that actor's later transitions. The snapshots are every runtime actor's own
 * (`fromPromise`'s, field for field), so a child restored before it starts reads the same.
 */
function routed<K extends keyof RuntimeActors>(key: K): RuntimeActors[K] {
  const base = fromPromise<unknown, unknown>(() => Promise.reject(new Error(`the ${key} actor was not routed`)));
  const started = new WeakMap<AnyActorRef, AnyActorLogic>();
  const logic = {
    ...base,
    transition: (state: never, event: never, scope: { self: AnyActorRef }) =>
      (started.get(scope.self) ?? (base as AnyActorLogic)).transition(state, event, scope as never),
    start: (state: never, scope: { self: AnyActorRef }) => {
      const own = activeRoute().actors[key]!;
      started.set(scope.self, own);
      own.start?.(state, scope as never);
    },
  };
  return logic as unknown as RuntimeActors[K];
}

const ROUTED_ACTORS: RuntimeActors = {
  model: routed('model'),
  validateCall: routed('validateCall'),
  authorizeCall: routed('authorizeCall'),
  recheckCall: routed('recheckCall'),
  executeReads: routed('executeReads'),
  executeWrite: routed('executeWrite'),
  lookupWrite: routed('lookupWrite'),
  summariseConversation: routed('summariseConversation'),
};

let shared: AgentMachine | undefined;

/** The process's agent machine, its toolkit and actors those of the route set by the task that runs (built once). */
export function sharedAgentMachine(): AgentMachine {
  shared ??= createAgentMachine(routedToolkit).provide({ actors: ROUTED_ACTORS }) as AgentMachine;
  return shared;
}
