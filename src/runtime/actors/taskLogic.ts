/**
 * The runtime's invoked actors' logic: XState's `fromPromise`, with the actor's stop handed over as a `Cancel`
 * (timeouts.ts), whose `AbortSignal` is made only when asked for. `fromPromise` makes an `AbortController` for every
 * actor it starts, about 3 µs, two a read round (the model turn and the reads), whether anything listens or not.
 *
 * The snapshots are `fromPromise`'s, field for field (a persisted task holds its children's), and so are the events
 * the promise's settling sends: a snapshot saved by one restores with the other.
 */
import { type ActorSystem, type AnyActorRef, type PromiseActorLogic, type PromiseSnapshot, fromPromise } from 'xstate';
import { Cancel } from '../timeouts.js';
import { currentRoute, withRoute } from '../machineRoute.js';

const RESOLVE = 'xstate.promise.resolve';
const REJECT = 'xstate.promise.reject';
const STOP = 'xstate.stop';

export interface TaskArgs<TInput> {
  input: TInput;
  /** Stops when the actor is stopped (its state left, the task stopped); its signal is made on first use. */
  stop: Cancel;
  self: AnyActorRef;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- XState's own AnyActorSystem, which it does not export
  system: ActorSystem<any>;
}

const stops = new WeakMap<AnyActorRef, Cancel>();

/** As `fromPromise(create)`, with `stop` in place of `signal`. */
export function fromTask<TOutput, TInput>(
  create: (args: TaskArgs<TInput>) => Promise<TOutput>,
): PromiseActorLogic<TOutput, TInput> {
  // fromPromise's logic, with `start` and the stop of `transition` replaced: snapshots, events and types stay its own.
  const logic = fromPromise<TOutput, TInput>(() => Promise.reject(new Error('replaced by fromTask')));
  const transition = logic.transition;
  return {
    ...logic,
    config: create as never,
    transition: (state, event, scope) => {
      if (state.status === 'active' && (event as { type: string }).type === STOP) {
        stops.get(scope.self)?.abort();
        stops.delete(scope.self);
        return { ...state, status: 'stopped', input: undefined } as PromiseSnapshot<TOutput, TInput>;
      }
      return transition(state, event, scope);
    },
    start: (state, { self, system }) => {
      if (state.status !== 'active') return;
      const stop = new Cancel();
      stops.set(self, stop);
      // The parent runs on when this settles, later: under the route of the run that started this (the shared
      // machine's gates and actors are that orchestrator's; `machineRoute.ts`).
      const route = currentRoute();
      const settle = (type: typeof RESOLVE | typeof REJECT, data: unknown) => {
        if (self.getSnapshot().status !== 'active') return;
        stops.delete(self);
        const relay = system as unknown as { _relay: (from: AnyActorRef, to: AnyActorRef, event: unknown) => void };
        withRoute(route, () => relay._relay(self, self, { type, data }));
      };
      let running: Promise<TOutput>;
      try {
        running = create({ input: state.input as TInput, stop, self, system });
      } catch (error) {
        running = Promise.reject(error as Error);
      }
      void running.then(
        (value) => settle(RESOLVE, value),
        (error: unknown) => settle(REJECT, error),
      );
    },
  };
}
