/**
 * What the counting scripts (microsteps.ts, writeMicrosteps.ts) read: XState's inspection events (microsteps, actions,
 * actors started) through an orchestrator's `inspect` option, and the AbortControllers and timers the process makes,
 * counted by wrapping the globals when this module is imported.
 */
import type { InspectionEvent } from 'xstate';

export interface Counts {
  microsteps: number;
  actions: number;
  actors: number;
  abortControllers: number;
  timers: number;
}

export const COUNT_KEYS = ['microsteps', 'actions', 'actors', 'abortControllers', 'timers'] as const;

/** AbortControllers and timers made since the process started (or since the caller reset them). */
export const live = { abortControllers: 0, timers: 0 };
const NativeAbortController = globalThis.AbortController;
globalThis.AbortController = class extends NativeAbortController {
  constructor() {
    super();
    live.abortControllers++;
  }
};
const nativeSetTimeout = globalThis.setTimeout;
globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
  live.timers++;
  return nativeSetTimeout(...args);
}) as typeof setTimeout;

/** Counters and the `inspect` option that feeds them; `now()` reads them with the live counts. */
export function inspectionCounter() {
  const counts = { microsteps: 0, actions: 0, actors: 0 };
  return {
    inspect: (event: InspectionEvent) => {
      if (event.type === '@xstate.microstep') counts.microsteps++;
      else if (event.type === '@xstate.action') counts.actions++;
      else if (event.type === '@xstate.actor') counts.actors++;
    },
    now: (): Counts => ({ ...counts, ...live }),
  };
}
