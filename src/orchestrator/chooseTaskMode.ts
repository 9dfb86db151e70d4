/**
 * The constructor's one choice between the two modes of `taskMode.ts` (kept apart from the interface, which both
 * modes import).
 */
import { DispatchedMode } from './dispatchedMode.js';
import { LocalMode } from './localMode.js';
import type { TaskMode, TaskModeDeps } from './taskMode.js';

/** Picks the mode: dispatched when the options name a dispatch, else local. The only place that asks. */
export function chooseTaskMode(deps: TaskModeDeps): TaskMode {
  const { dispatch } = deps.options;
  return dispatch ? new DispatchedMode(dispatch, deps) : new LocalMode(deps);
}
