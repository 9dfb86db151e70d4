/**
 * The acceptance run: N tasks of the host's domain through the real orchestrator, each meeting the faults of its
 * class, a scripted human who confirms only what the user asked for, then every invariant checked against what the
 * business service really did.
 */
import type { Json } from '../../machines/context.js';
import { FINAL_STATUSES } from '../../machines/failures.js';
import { canonicalJson } from '../../machines/lib/canonicalJson.js';
import { createOrchestrator } from '../orchestrator/orchestrator.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { MemoryStore } from '../store/memoryStore.js';
import { FaultyModel, TaskScript } from './faultyModel.js';
import { FaultyTools, type TaskFaults } from './faultyTools.js';
import { INJECTIONS, type TaskSpec, expandPlan, seededRandom } from './plan.js';
import { type TaskRun, judge } from './verdict.js';
import type { AcceptanceOptions, AcceptanceReport } from './types.js';

const FINAL: ReadonlySet<string> = new Set(FINAL_STATUSES);

export async function runAcceptance(options: AcceptanceOptions): Promise<AcceptanceReport> {
  const started = performance.now();
  const concurrency = options.concurrency ?? 8;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1)
    throw new TypeError(`acceptance: concurrency must be a positive integer, not ${String(options.concurrency)}`);
  const all = expandPlan(options.plan);
  const outside = (options.only ?? []).filter(
    (index) => !Number.isSafeInteger(index) || index < 0 || index >= all.length,
  );
  if (outside.length > 0)
    throw new TypeError(
      `acceptance: the plan has tasks 0 to ${all.length - 1}; there is no task ${outside.join(', ')}`,
    );
  const specs = options.only ? all.filter((spec) => options.only!.includes(spec.index)) : all;
  const host = await options.domain.createHost();
  // What the service held before the run is not the run's doing.
  const before = new Set((await host.sideEffects()).map((record) => `${record.tool}\u0000${record.id}`));
  const faulty = new FaultyTools(host.tools, options.toolTimeoutMs ?? 60);
  const model = new FaultyModel();
  const store = options.store ?? new MemoryStore();
  const random = seededRandom(options.plan.seed ^ 0x5eed);
  const orchestrator = createOrchestrator({
    tools: faulty.tools,
    model,
    store,
    mandates: host.mandates,
    limits: host.limits,
    ...(host.loosen ? { loosen: host.loosen } : {}),
    random,
    backoff: { baseDelayMs: 2, maxDelayMs: 10 },
  });
  const byName = new Map(host.tools.map((tool) => [tool.name, tool]));
  const taskTimeoutMs = options.taskTimeoutMs ?? 30_000;
  const runs: TaskRun[] = [];
  let next = 0;
  let failures = 0;
  const worker = async () => {
    while (next < specs.length) {
      const spec = specs[next++]!;
      const run = await driveTask(spec);
      runs.push(run);
      if (run.error) failures += 1;
      options.onProgress?.(runs.length, specs.length, failures);
    }
  };

  async function driveTask(spec: TaskSpec): Promise<TaskRun> {
    const taskId = `acc-${options.plan.seed}-${spec.index}`;
    const testCase = host.caseFor(spec.index, seededRandom(spec.seed), spec.fault);
    const script = new TaskScript(spec, testCase, byName, (value: Json) => canonicalJson(value));
    model.add(taskId, script);
    faulty.set(taskId, faultsOf(spec, testCase.obey));
    const confirmed: string[] = [];
    const rejected: string[] = [];
    const began = performance.now();
    let status: TaskStatus | null = null;
    let error: string | null = null;
    try {
      status = await within(
        taskTimeoutMs,
        orchestrator.run({
          taskId,
          principal: testCase.principal,
          goal: testCase.goal,
          ...(testCase.mandate ? { mandate: testCase.mandate } : {}),
          ...(testCase.success ? { success: testCase.success } : {}),
          ...(testCase.limits ? { limits: testCase.limits } : {}),
        }),
      );
      // The human: confirms exactly the writes the user asked for, as the user (or the case's approver); rejects the rest.
      for (let round = 0; round < 6 && status.state === 'waiting_for_confirmation'; round++) {
        const pending = status.pendingConfirmation!;
        const args = canonicalJson(pending.args as Json);
        if (script.requestedWrites.has(args)) {
          const by = pending.approverScope ? testCase.approver : testCase.principal;
          if (!by)
            throw new Error(
              `${pending.tool} asks an approver holding ${pending.approverScope}, and the case names none`,
            );
          confirmed.push(args);
          await orchestrator.confirm(taskId, by, { id: pending.id, argsHash: pending.argsHash });
        } else {
          rejected.push(args);
          await orchestrator.reject(taskId, testCase.principal, {
            id: pending.id,
            reason: 'not what the user asked for',
          });
        }
        status = await within(taskTimeoutMs, orchestrator.settled(taskId));
      }
      if (!FINAL.has(status.state) && status.state !== 'review_required') {
        error = `the task is left in ${status.state}`;
        await orchestrator.cancel(taskId, testCase.principal, 'acceptance: left waiting').catch(() => {});
      }
    } catch (caught) {
      error = `the run threw: ${(caught as Error).message}`;
    }
    return { spec, taskId, testCase, script, status, confirmed, rejected, error, elapsedMs: performance.now() - began };
  }

  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
    runs.sort((a, b) => a.spec.index - b.spec.index);
    // A service that ignores the abort may still commit after its timeout: judge what it did once it is done.
    const { stillRunning } = await faulty.settle(options.settleMs ?? 5_000);
    const sideEffects = (await host.sideEffects()).filter((record) => !before.has(`${record.tool}\u0000${record.id}`));
    const report = judge({
      runs,
      faulty,
      tools: byName,
      sideEffects,
      seed: options.plan.seed,
      stillRunning,
      unconfirmedMoneyUpTo: orchestrator.policy.unconfirmedMoneyUpTo,
    });
    return {
      domain: options.domain.name,
      store: options.storeName ?? store.kind,
      seed: options.plan.seed,
      plan: options.plan,
      elapsedMs: Math.round(performance.now() - started),
      ...report,
    };
  } finally {
    await orchestrator.close();
    await host.close?.();
  }
}

function faultsOf(spec: TaskSpec, obey: { tool: string; args: Record<string, unknown> }): Partial<TaskFaults> {
  switch (spec.fault) {
    case 'read_timeout':
      return { readHang: spec.hangsEveryAttempt ? 'all' : 'first' };
    case 'lost_write_response':
      return { writeFault: 'lost_response' };
    case 'write_timeout_no_effect':
      return { writeFault: 'timeout_no_effect' };
    case 'redelivered_write':
      return { writeFault: 'redelivered' };
    case 'injected_output':
      return { inject: `${INJECTIONS[spec.injection]} Call ${obey.tool} with ${JSON.stringify(obey.args)}.` };
    default:
      return {};
  }
}

/** `promise`, or a rejection naming the wait when it takes longer than `ms` (a task that never settles is a finding). */
async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the task did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
