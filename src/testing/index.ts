/**
 * `statechart-agent/testing`: test doubles for hosts' own tests and demos. A scripted model that records what it
 * was asked and throws when its script runs out, a gate to step a model turn by turn, a clock that moves only
 * when told to. Kept apart from the main entry so production code does not import them by accident.
 */
export {
  ScriptedModel,
  ScriptExhaustedError,
  reply,
  scriptedModel,
  type RecordedRequest,
  type ScriptedModelOptions,
  type ScriptStep,
  type ScriptView,
} from './scriptedModel.js';
export { gatedModel, type GatedModel } from './gatedModel.js';
export { ManualClock } from './manualClock.js';
export { shiftedClock } from '../clock.js';
export type { AgentErrorCode } from '../errorCodes.js';
