/**
 * The verdict's parts that do not judge: the fault each class must show, the host policy's confirmation rule
 * evaluated apart from the library, the report's rows and metrics, and small list helpers.
 */
import type { Json } from '../../machines/context.js';
import type { Tool } from '../tool.js';
import type { Execution, FaultyTools } from './faultyTools.js';
import type { AcceptanceCase, ClassRow, FaultClass, Metrics, SideEffect } from './types.js';

export interface TaskRun {
  spec: TaskSpec;
  taskId: string;
  testCase: AcceptanceCase;
  script: TaskScript;
  status: TaskStatus | null;
  /** Canonical arguments the kit's human confirmed, and rejected. */
  confirmed: string[];
  rejected: string[];
  error: string | null;
  elapsedMs: number;
}
import type { TaskStatus } from '../orchestrator/status.js';
import type { TaskScript } from './faultyModel.js';
import type { TaskSpec } from './plan.js';

/** What the per-task checks count across the run, for the metrics. */
export interface VerdictCounts {
  unconfirmed: number;
  overruns: number;
  formatInjected: number;
  formatBlocked: number;
  unauthorized: number;
  unauthorizedRefused: number;
  authorized: number;
  falselyRefused: number;
}

/** The run's metrics, from the tools' own log and the service's records. */
export function runMetrics(
  runs: readonly TaskRun[],
  faulty: FaultyTools,
  sideEffects: readonly SideEffect[],
  recordsByKey: ReadonlyMap<string, SideEffect[]>,
  lookedUp: ReadonlySet<string>,
  counts: VerdictCounts,
): Metrics {
  const all = runs.flatMap((run) => run.script.proposals);
  const duplicateExecutions = [...recordsByKey.values()].reduce(
    (sum, records) => sum + Math.max(0, records.length - 1),
    0,
  );
  const faultedKinds = new Set<Execution['fault']>(['hung', 'lost_response', 'timeout_no_effect', 'redelivered']);
  return {
    calls: all.length,
    tasks: runs.length,
    formatRejectionRate: ratio(counts.formatBlocked, counts.formatInjected),
    permissionRejectionAccuracy: ratio(
      counts.unauthorizedRefused + counts.authorized - counts.falselyRefused,
      counts.unauthorized + counts.authorized,
    ),
    permissionRecall: ratio(counts.unauthorizedRefused, counts.unauthorized),
    falsePermissionRefusals: ratio(counts.falselyRefused, counts.authorized),
    unknownOutcomes: lookedUp.size,
    heldForReview: runs.filter((run) => run.status?.state === 'review_required').length,
    callLatencyMs: percentiles(faulty.executions.filter((e) => !faultedKinds.has(e.fault)).map((e) => e.durationMs)),
    faultedCallLatencyMs: percentiles(
      faulty.executions.filter((e) => faultedKinds.has(e.fault)).map((e) => e.durationMs),
    ),
    taskLatencyMs: percentiles(runs.map((run) => run.elapsedMs)),
    duplicateExecutions,
    budgetOverruns: counts.overruns,
    unconfirmedSideEffects: counts.unconfirmed,
    businessRecords: sideEffects.length,
    distinctIdempotencyKeys: recordsByKey.size,
  };
}

/** The execution fault each class must show, and what to say when it never happened. */
export const APPLIED: Partial<Record<FaultClass, { fault: Execution['fault']; missing: (read: string) => string }>> = {
  read_timeout: { fault: 'hung', missing: (read) => `no ${read} reached the tool, so no read hung` },
  lost_write_response: { fault: 'lost_response', missing: () => 'no write reached the tool, so no response was lost' },
  write_timeout_no_effect: {
    fault: 'timeout_no_effect',
    missing: () => 'no write reached the tool, so none timed out',
  },
  redelivered_write: { fault: 'redelivered', missing: () => 'no write reached the tool, so none was delivered twice' },
  injected_output: {
    fault: 'injected',
    missing: (read) =>
      `no text could be injected into the output of ${read}: it never succeeded, or no string field of it takes one`,
  },
};

/**
 * Whether the host's policy asks for a confirmation of this write, evaluated here, apart from the library: a write
 * is confirmed unless its tool waives it in writing or its rule says no for these arguments; an irreversible or
 * high-risk write always is; a money-moving write is, past what the host lets run unconfirmed.
 */
export function toolAsksConfirmation(
  tool: Tool & { effect: 'write' },
  args: Json,
  testCase: AcceptanceCase,
  task: { moneyMoved: number; writesStarted: number },
  unconfirmedMoneyUpTo: number,
): boolean {
  if (tool.risk === 'irreversible' || tool.risk === 'high_risk') return true;
  let amount: number;
  try {
    amount = tool.amount ? Number(tool.amount(args)) : 0;
  } catch {
    return true;
  }
  if (!(amount >= 0)) return true;
  if (amount > 0 && amount + task.moneyMoved > unconfirmedMoneyUpTo) return true;
  const rule = tool.confirm;
  // Without a rule a write is confirmed; a bare 'never' gives no reason, so it does not waive it.
  if (rule === undefined || rule === 'never' || rule === 'always') return true;
  if (typeof rule === 'object') return !('never' in rule);
  try {
    return Boolean(rule(args, testCase.principal, task));
  } catch {
    return true;
  }
}

/** The first send of each write intent (a resend under the same key is the same intent). */
export function firstSendPerKey(writes: Execution[]): Execution[] {
  const seen = new Set<string>();
  return writes.filter((w) => w.idempotencyKey !== null && !seen.has(w.idempotencyKey) && seen.add(w.idempotencyKey));
}

export function emptyRow(fault: ClassRow['fault']): ClassRow {
  return {
    fault,
    tasks: 0,
    injected: 0,
    blockedBeforeExecution: 0,
    askedHuman: 0,
    refusedBy: {},
    executed: 0,
    businessRecords: 0,
    duplicates: 0,
    wrongOutcomes: 0,
    done: 0,
    answered: 0,
  };
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

const ratio = (part: number, whole: number) => (whole === 0 ? null : part / whole);
export const canonicalScopes = (scopes: readonly string[]) => [...scopes].sort().join(' ');

function percentiles(values: number[]): { p50: number; p95: number } {
  if (values.length === 0) return { p50: 0, p95: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest rank: the smallest value with at least q of the values at or below it.
  const at = (q: number) => Math.round(sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]! * 10) / 10;
  return { p50: at(0.5), p95: at(0.95) };
}
