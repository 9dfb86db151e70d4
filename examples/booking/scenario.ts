/**
 * What a demo scenario is: its name, what it runs against, and what it reports. Its own module so the booking
 * scenarios (`scenarios.ts`) and the refund scenario (`refundScenario.ts`) share it without importing each other.
 */
import type {
  AgentModel,
  AuditRecord,
  Clock,
  OrchestratorOptions,
  TaskStatus,
  TaskStore,
  TranscriptEntry,
} from '../../src/index.js';
import type { ScriptStep } from '../../src/testing/index.js';
import type { BookingRow } from './bookingService.js';
import type { RefundRow } from './refundService.js';

export interface ScenarioEnv {
  store: TaskStore;
  clock?: Clock;
  /** Replaces the scripted model (e.g. a real one); receives the script the scenario would use. */
  model?: (script: ScriptStep[]) => AgentModel;
  inspect?: OrchestratorOptions['inspect'];
  /** Refund: stop at the first confirmation and leave the task waiting (for the step CLI). */
  leaveWaiting?: boolean;
  /**
   * Long: how many read rounds (default 300). Sweeps that replay after every step cost the square of the task's
   * length, so they run it shorter; it still compacts several times.
   */
  longRounds?: number;
}

/** The demo's scenarios, in the order they run. */
export const SCENARIO_NAMES = [
  'normal',
  'conflict',
  'searchTimeout',
  'guessedWrite',
  'lostResponse',
  'refused',
  'noProjector',
  'wrongDate',
  'refund',
  'compensated',
  'planned',
  'workflow',
  'delegated',
  'long',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

export interface ScenarioResult {
  name: ScenarioName;
  title: string;
  /** What the scenario shows, one line. */
  expectation: string;
  status: TaskStatus;
  audit: AuditRecord[];
  /** Human steps the scenario took, in order (confirmations, rejections...). */
  steps: string[];
  bookings: BookingRow[];
  refunds: RefundRow[];
  /** How many reservation requests reached the booking service (lost responses included). */
  reserveRequests: number;
  /** What the task showed the model (the booking scenarios): where the demo shows what was sealed. */
  transcript?: TranscriptEntry[];
}
