/**
 * A worker process for the crash tests: drives one demo task on a RedisStore, with the demo tools over the Redis
 * booking/refund services and the scripted demo model, and reports on stdout (see crashProtocol.ts). Faults are
 * armed from outside, in Redis; when this process meets one it prints `AT <boundary>` and stays blocked there
 * until the test kills it.
 *
 * Run: node --import tsx test/support/crashWorker.ts '<WorkerConfig JSON>'
 */
import { createInterface } from 'node:readline';
import type { AgentModel } from '../../src/model/agentModel.js';
import { type RedisDemoFault, RedisBookingService } from '../../examples/booking/redisBookingService.js';
import { DEMO_FLOWS, demoModel, durableDemoTools } from '../../examples/booking/durableDemo.js';
import { type TaskStatus, createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import { type AckedSave, type WorkerConfig, type WorkerResult, recordingAcks } from './crashProtocol.js';

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const say = (tag: string, value?: unknown) =>
  process.stdout.write(
    value === undefined ? `${tag}\n` : `${tag} ${typeof value === 'string' ? value : JSON.stringify(value)}\n`,
  );

/** Where each fault leaves the task when this process meets it. */
const BOUNDARY: Partial<Record<RedisDemoFault, string>> = {
  stallReserves: 'before-effect',
  loseReserveResponses: 'after-effect',
  loseRefundResponses: 'after-effect',
  hangLookups: 'reconciling',
  slowSearches: 'search',
  hangSearches: 'search',
};

let lastAcked: AckedSave | null = null;

async function main(): Promise<void> {
  const services = new RedisBookingService({
    url: config.redisUrl,
    prefix: config.prefix,
    onFault: (fault) => void reportFault(fault),
  });
  await services.seed();
  const { store, ackOf } = recordingAcks(new RedisStore({ url: config.redisUrl, prefix: config.prefix }));
  const orchestrator = createOrchestrator({
    tools: durableDemoTools(services, config.timeouts),
    model: hanging(demoModel(), config.hangModelTurn),
    store,
    // The refund tool declares the money it moves: these tasks may move up to 10,000.00.
    limits: { money: 1_000_000 },
    lease: { acquireTimeoutMs: 5_000, ...config.lease },
    expirySweepMs: 0,
    // The matrix checks what recover() reports; the orphan sweep would take the task over first with these TTLs.
    orphanSweepMs: 0,
    backoff: { baseDelayMs: 20, maxDelayMs: 100 },
  });
  orchestrator.onSaved((summary) => {
    if (summary.taskId !== config.taskId) return;
    const ack = ackOf(summary.taskId, summary.revision);
    lastAcked = {
      taskId: summary.taskId,
      revision: summary.revision,
      state: summary.state,
      stateValue: summary.stateValue,
      audit: ack?.audit ?? -1,
      appended: ack?.appended ?? [],
    };
    say('SAVED', lastAcked);
  });

  say('READY');
  if (config.waitForGo) await lineFromParent('GO');

  let status: TaskStatus | null;
  if (config.action === 'run') {
    await orchestrator.start({ ...DEMO_FLOWS[config.flow], taskId: config.taskId });
    status = await orchestrator.settled(config.taskId);
  } else {
    const report = await orchestrator.recover();
    say('REPORT', report);
    status =
      report.resumed.includes(config.taskId) || config.confirmWaiting
        ? await orchestrator.settled(config.taskId)
        : null;
  }
  if (status?.pendingConfirmation && config.blockWhenWaiting) {
    say('AT', 'awaiting-confirmation');
    return block();
  }
  if (status?.pendingConfirmation && (config.confirmWaiting || config.action === 'run')) {
    const principal = DEMO_FLOWS[config.flow].principal;
    const confirmed = await orchestrator.confirm(config.taskId, principal, status.pendingConfirmation);
    if (!confirmed.accepted) throw new Error(`confirmation refused: ${confirmed.code}`);
    status = await orchestrator.settled(config.taskId);
  }
  if (status) say('RESULT', resultOf(status));
  await orchestrator.close();
  await store.close();
  await services.close();
}

/** Prints the boundary marker; a lookup's marker waits until the reconciling state is durable. */
async function reportFault(fault: RedisDemoFault): Promise<void> {
  const boundary = BOUNDARY[fault];
  if (!boundary) return;
  if (boundary === 'reconciling') {
    while (lastAcked?.stateValue !== 'executing.reconciling') await new Promise((r) => setTimeout(r, 2));
  }
  say('AT', boundary);
}

/** The model, except that the call of `turn` never answers (after printing the marker). */
function hanging(model: AgentModel, turn: number | undefined): AgentModel {
  if (turn === undefined) return model;
  return {
    ...model,
    decide(request) {
      if (request.turn !== turn) return model.decide(request);
      say('AT', 'model-call');
      return block();
    },
  };
}

function resultOf(status: TaskStatus): WorkerResult {
  const pending = status.pendingConfirmation;
  return {
    taskId: status.taskId,
    state: status.state,
    code: status.outcome?.reason.code ?? null,
    answer: status.outcome?.answer ?? null,
    revision: status.revision,
    pendingConfirmation: pending && { id: pending.id, argsHash: pending.argsHash, summary: pending.summary },
  };
}

/** Never settles, and keeps the process alive until it is killed. */
function block(): Promise<never> {
  setInterval(() => {}, 60_000);
  return new Promise(() => {});
}

function lineFromParent(expected: string): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    lines.on('line', (line) => {
      if (line.trim() !== expected) return;
      lines.close();
      resolve();
    });
  });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const e = error instanceof Error ? error : new Error(String(error));
    say('FAILED', { name: e.name, code: (e as { code?: unknown }).code ?? null, message: e.message });
    process.exit(3);
  },
);
