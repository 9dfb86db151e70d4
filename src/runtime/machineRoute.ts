/**
 * Which orchestrator's tools and actors the shared agent machine (`sharedMachine.ts`) serves right now. One machine
 * is built per process; what differs between orchestrators (the toolkit its gates read, the actors it invokes) is
 * looked up here while a task's actor runs. The actor runs synchronously from a few entry points only, and each sets
 * its task's route around the run: the task's own calls (`LiveTask`: create, start, send, stop), the settling of an
 * invoked actor (`fromTask`) and XState's own timers (`routeClock`, for delayed events; the chart has none today).
 * Nothing runs the machine outside a route: asked without one, it throws.
 */
import type { Toolkit } from '../../machines/toolkit.js';
import type { AnyActorLogic } from 'xstate';

/** One orchestrator's side of the shared machine. */
export interface MachineRoute {
  /** What the chart's gates read: the orchestrator's installed tools, privacy and workflows. */
  readonly toolkit: Toolkit;
  /** The invoked actors (`createRuntimeActors`), bound to the orchestrator's model, tools, clock and live tasks. */
  readonly actors: Readonly<Record<string, AnyActorLogic>>;
}

let current: MachineRoute | undefined;

/**
 * Runs `fn` with `route` as the one the shared machine serves, then restores the previous one (runs nest). An
 * undefined route (a task on a machine of its own) clears the route for the run rather than inheriting the outer
 * one: nothing run inside it can be judged with another task's orchestrator's tools.
 */
export function withRoute<T>(route: MachineRoute | undefined, fn: () => T): T {
  if (route === current) return fn();
  const previous = current;
  current = route;
  try {
    return fn();
  } finally {
    current = previous;
  }
}

/** The route being served, or undefined outside every task's run. */
export function currentRoute(): MachineRoute | undefined {
  return current;
}

/** The route being served; throws outside a task's run (a gate must never be judged against another's tools). */
export function activeRoute(): MachineRoute {
  if (current === undefined)
    throw new Error('the shared agent machine ran outside the run of a task (no orchestrator route is set)');
  return current;
}

/** XState's clock (the `clock` option of `createActor`; XState does not export its type). */
export interface ActorClock {
  setTimeout(fn: (...args: unknown[]) => void, timeout: number): ReturnType<typeof setTimeout>;
  clearTimeout(id: ReturnType<typeof setTimeout>): void;
}

const clocks = new WeakMap<MachineRoute, ActorClock>();

/** XState's clock for the actors of `route`'s tasks: a delayed event it schedules runs under that route. */
export function routeClock(route: MachineRoute): ActorClock {
  let clock = clocks.get(route);
  if (clock === undefined) {
    clock = {
      setTimeout: (fn: (...args: unknown[]) => void, timeout: number) =>
        setTimeout((...args: unknown[]) => withRoute(route, () => fn(...args)), timeout),
      clearTimeout: (id: ReturnType<typeof setTimeout>) => clearTimeout(id),
    };
    clocks.set(route, clock);
  }
  return clock;
}
