/**
 * `statechart-agent/inspect`: watch tasks live. Off unless you attach one of these to `createOrchestrator({ inspect })`.
 */
export {
  createInspectionStream,
  type InspectionMessage,
  type InspectionSink,
  type InspectionStreamOptions,
} from './inspectionStream.js';
export { jsonLinesFileSink, jsonLinesSink } from './jsonLinesSink.js';
export { webSocketSink, type WebSocketSink, type WebSocketSinkOptions } from './webSocketSink.js';
export {
  createStatelyInspection,
  InspectorStartError,
  type StatelyInspection,
  type StatelyInspectionOptions,
  type StepView,
  type RelayRequest,
} from './statelyInspector.js';
export type { TaskAccessFacts } from './statelyFrames.js';
export type { AgentErrorCode } from '../errorCodes.js';
