/**
 * `statechart-agent/bullmq`: dispatch of tasks to worker processes on BullMQ (an optional peer dependency).
 */
export { BullmqDispatch, type BullmqDispatchOptions, bullmqDispatch } from './dispatch/bullmqDispatch.js';
export type {
  Dispatch,
  DispatchWorker,
  DispatchWorkerOptions,
  DriveJob,
  QueueBacklog,
  QueueDepth,
} from './orchestrator/dispatch.js';
export type { AgentErrorCode, DispatchErrorCode } from './errorCodes.js';
