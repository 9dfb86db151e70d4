/**
 * `npm run bench`: what persistence costs on Redis, measured in one run against the same Redis (REDIS_URL, a fresh
 * key prefix deleted afterwards). Tasks use a stateless scripted model and a no-op read tool, so nearly all the
 * time is the runtime and the store. A step is one acknowledged save (counted with `onSaved`).
 *
 * Progress goes to stderr; the table (markdown) to stdout.
 */
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { AgentModel } from '../src/model/agentModel.js';
import { reply } from '../src/testing/scriptedModel.js';
import { type Orchestrator, type OrchestratorOptions, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { Principal } from '../machines/context.js';
import { DEFAULT_REDIS_URL, createRedisClient } from '../src/store/redis/redisConnection.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { defineTool } from '../src/tool.js';

const SINGLE_TURNS = 800;
const CONCURRENT_TASKS = 100;
const CONCURRENT_TURNS = 40;
const BARE_SETS = 5_000;
const RESUME_TASK_STEPS = 1_000;
const RESUMES = 50;
const WAITING_TASKS = 10_000;

const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
const prefix = `bench-${randomBytes(4).toString('hex')}`;
const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);
const gc = exposeGc();

const USER: Principal = { userId: 'bench', tenantId: 'bench', scopes: [] };
const NO_LIMITS = {
  modelTurns: 1_000_000,
  toolCalls: 1_000_000,
  tokens: Number.MAX_SAFE_INTEGER,
  costMicros: Number.MAX_SAFE_INTEGER,
  wallClockMs: 24 * 3_600_000,
};

const noop = defineTool({
  name: 'noop',
  description: 'does nothing, at once',
  effect: 'read',
  scopes: [],
  timeoutMs: 5_000,
  input: z.strictObject({ n: z.number().int() }),
  output: z.strictObject({ n: z.number().int() }),
  execute: async ({ n }) => ({ ok: true, value: { n } }),
});

/** A write that always needs a confirmation: tasks proposing it wait. */
const hold = defineTool({
  name: 'hold',
  description: 'a write that needs a confirmation',
  effect: 'write',
  scopes: [],
  timeoutMs: 5_000,
  sameKeyRetrySafe: true,
  confirm: 'always',
  input: z.strictObject({ n: z.number().int() }),
  output: z.strictObject({ n: z.number().int() }),
  execute: async ({ n }) => ({ ok: true, value: { n } }),
  lookup: async () => ({ found: false as const }),
});

/**
 * Goal "turns:N": N no-op reads, then an answer. Goal "wait": propose `hold` (and wait for its confirmation).
 * From turn `control.hangFrom` on, the model call hangs until aborted (a task at rest, in flight).
 */
interface Control {
  hangFrom: number;
  /** Called when a call starts hanging. */
  onHang?: () => void;
}

function benchModel(control: Control): AgentModel {
  return {
    name: 'bench',
    reservation: { tokens: 0, costMicros: 0 },
    decide({ goal, turn, signal }) {
      if (goal === 'wait') return Promise.resolve(reply.call('hold', { n: 1 }, 'c1'));
      if (turn >= control.hangFrom) {
        control.onHang?.();
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      }
      const turns = Number(goal.slice('turns:'.length));
      return Promise.resolve(turn <= turns ? reply.call('noop', { n: turn }, `c${turn}`) : reply.answer('done'));
    },
  };
}

async function main(): Promise<void> {
  const client = createRedisClient(url);
  const store = new RedisStore({ client, prefix });
  const control: Control = { hangFrom: Number.POSITIVE_INFINITY };
  const options: OrchestratorOptions = {
    tools: [noop, hold],
    model: benchModel(control),
    store,
    limits: NO_LIMITS,
    expirySweepMs: 0,
    lease: { ttlMs: 60_000 },
  };
  const rows: Row[] = [];
  try {
    await client.ping();
    progress(`Redis ${url}, prefix {${prefix}}`);

    // --- one task, sequential ------------------------------------------------------------------------
    progress('warm-up: one task of 300 turns, and the same without a store');
    const warmUp = createOrchestrator(options);
    await warmUp.run({ principal: USER, goal: 'turns:300', taskId: 'warm-up' });
    await warmUp.close();
    await runtimeAlone(options, 1, 300);
    progress(`one task: ${SINGLE_TURNS} turns`);
    const single = await runOneTask(options, client, `turns:${SINGLE_TURNS}`, 'single');
    const payload = (await client.hget(redisKeys(prefix).task('single'), 'envelope'))!;
    progress(`one task: ${single.steps} steps at ${fmt(single.stepsPerSecond)}/s; envelope ${payload.length} B`);

    // --- bare SET ------------------------------------------------------------------------------------
    progress(`bare SET of the ${payload.length} B envelope: ${BARE_SETS} sequential, ${BARE_SETS * 4} pipelined`);
    const bare = await bareSets(client, payload);
    progress(`bare SET: ${fmt(bare.sequential)}/s sequential, ${fmt(bare.pipelined)}/s pipelined`);

    // --- 100 tasks, one process ----------------------------------------------------------------------
    progress(`${CONCURRENT_TASKS} concurrent tasks of ${CONCURRENT_TURNS} turns`);
    const many = await runManyTasks(createOrchestrator(options), client, CONCURRENT_TASKS, `turns:${CONCURRENT_TURNS}`);
    progress(`${CONCURRENT_TASKS} tasks: ${many.steps} steps at ${fmt(many.stepsPerSecond)}/s`);

    // --- the runtime alone -----------------------------------------------------------------------------
    progress('the same tasks with a store that acknowledges at once (no Redis)');
    const aloneOne = await runtimeAlone(options, 1, SINGLE_TURNS);
    const aloneMany = await runtimeAlone(options, CONCURRENT_TASKS, CONCURRENT_TURNS);
    progress(`runtime alone: ${fmt(aloneOne.turnsPerSecond)} turns/s (one task), ${fmt(aloneMany.turnsPerSecond)} turns/s (${CONCURRENT_TASKS} tasks)`);
    const isolated = await isolatedSaves(store, client, 'single');
    progress(`one save on its own: ${fmt(isolated.wallUs)} µs`);

    // --- resume latency ------------------------------------------------------------------------------
    progress(`resume: building a task of ${RESUME_TASK_STEPS}+ steps`);
    const resume = await resumeLatency(options, control, single.steps / SINGLE_TURNS);
    progress(`resume: p50 ${resume.p50.toFixed(2)} ms, p99 ${resume.p99.toFixed(2)} ms over ${RESUMES}`);

    // --- waiting tasks -------------------------------------------------------------------------------
    progress(`${WAITING_TASKS} tasks waiting for confirmation`);
    const waiting = await waitingMemory(createOrchestrator(options), client);
    progress(`waiting: Redis ${fmt(waiting.redisPerTask)} B/task, Node heap ${waiting.heapPerTask.toFixed(1)} B/task`);

    const seqRatio = single.stepsPerSecond / bare.sequential;
    const pipeRatio = many.stepsPerSecond / bare.pipelined;
    const growth = single.bytesAt1000 / single.bytesAt10;
    rows.push(
      ['one task: persisted steps/s (sequential)', fmt(single.stepsPerSecond), `bare SET sequential ${fmt(bare.sequential)}/s`, pct(seqRatio), '≥ 50%', seqRatio >= 0.5],
      [`${CONCURRENT_TASKS} tasks in one process: persisted steps/s`, fmt(many.stepsPerSecond), `bare SET pipelined ${fmt(bare.pipelined)}/s`, pct(pipeRatio), '≥ 30%', pipeRatio >= 0.3],
      ['bytes sent per save: step 10 → step 1,000', `${fmt(single.bytesAt10)} → ${fmt(single.bytesAt1000)} B`, `envelope ${fmt(payload.length)} B`, `${growth.toFixed(2)}x`, '≤ 1.2x', growth <= 1.2],
      [
        `bytes sent per save: step 200 → 1,000 → ${fmt(single.steps)}`,
        `${fmt(single.bytesAt200)} → ${fmt(single.bytesAt1000)} → ${fmt(single.bytesAtLast)} B`,
        'after the bounded windows fill',
        `${(single.bytesAtLast / single.bytesAt200).toFixed(2)}x`,
        '≤ 1.2x',
        single.bytesAtLast / single.bytesAt200 <= 1.2,
      ],
      [`resume of a ${fmt(resume.steps)}-step task: p50 / p99`, `${resume.p50.toFixed(2)} / ${resume.p99.toFixed(2)} ms`, `${RESUMES} resumes, to the first acknowledged save`, '', '', null],
      [`Redis memory per waiting task (${fmt(WAITING_TASKS)} tasks)`, `${fmt(waiting.redisPerTask)} B`, 'INFO used_memory delta', '', '', null],
      [
        'Node memory per waiting task (after GC)',
        `heap ${waiting.heapPerTask.toFixed(1)} B, rss ${waiting.rssPerTask.toFixed(1)} B`,
        `heapUsed ${signedKb(waiting.heapDelta)}, rss ${signedKb(waiting.rssDelta)} in all`,
        '',
        '≈ 0 (evicted): < 100 B',
        waiting.heapPerTask < 100,
      ],
    );
    process.stdout.write(`${table(rows)}\n`);
    const us = (n: number) => `${fmt(n)} µs`;
    const perTurn = (p: { wallUs: number; cpuUs: number }, savesPerTurn: number) =>
      `${us(p.wallUs * savesPerTurn)} / ${us(p.cpuUs * savesPerTurn)}`;
    const ceilingOne = single.savesPerTurn * aloneOne.turnsPerSecond;
    const ceilingMany = many.savesPerTurn * aloneMany.turnsPerSecond;
    process.stdout.write(
      [
        '',
        '| where the time goes (a turn = one model call + one no-op read) | one task | 100 tasks |',
        '| --- | ---: | ---: |',
        `| saves per turn | ${single.savesPerTurn.toFixed(2)} | ${many.savesPerTurn.toFixed(2)} |`,
        `| per turn on Redis: wall / Node CPU | ${perTurn(single.phases, single.savesPerTurn)} | ${perTurn(many.phases, many.savesPerTurn)} |`,
        `| per turn, the runtime alone (a store that acknowledges at once): wall / Node CPU | ${us(1e6 / aloneOne.turnsPerSecond)} / ${us(aloneOne.cpuUsPerTurn)} | ${us(1e6 / aloneMany.turnsPerSecond)} / ${us(aloneMany.cpuUsPerTurn)} |`,
        `| steps/s if saving cost nothing (saves per turn x turns/s of the runtime alone) | ${fmt(ceilingOne)} (${pct(ceilingOne / bare.sequential)} of bare SET) | ${fmt(ceilingMany)} (${pct(ceilingMany / bare.pipelined)} of pipelined SET) |`,
        `| one save on its own (the final envelope + 4 entries): wall / Node CPU / save script in Redis | ${us(isolated.wallUs)} / ${us(isolated.cpuUs)} / ${us(isolated.redisUs)} | Redis busy ${pct(many.phases.redisBusy)} of the run |`,
        `| bare SET of the envelope: wall / Node CPU / execution in Redis | ${us(bare.roundTripUs)} / ${us(bare.cpuUs)} / ${us(bare.serverUs)} | ${us(1e6 / bare.pipelined)} per SET pipelined |`,
      ].join('\n') + '\n',
    );
    process.stdout.write(
      `\nNode ${process.version}, Redis at ${url}; one task ${single.steps} steps; ${CONCURRENT_TASKS} tasks x ${many.steps / CONCURRENT_TASKS} steps; ` +
        `bare SET of the ${fmt(payload.length)} B envelope, pipelined in batches of ${CONCURRENT_TASKS}.\n`,
    );
  } finally {
    progress('cleaning up');
    const deleted = await store.deleteAll().catch(() => 0);
    progress(`deleted ${deleted} keys under {${prefix}}`);
    await client.quit().catch(() => client.disconnect());
  }
}

/** One task driven to its end: steps/s between the first and the last acknowledged save, bytes per save, phases. */
async function runOneTask(options: OrchestratorOptions, client: Redis, goal: string, taskId: string) {
  const orchestrator = createOrchestrator(options);
  const socket = client.stream;
  const acks: { at: number; bytes: number }[] = [];
  let cpuAtFirst = process.cpuUsage();
  orchestrator.onSaved(() => {
    acks.push({ at: performance.now(), bytes: socket.bytesWritten });
    if (acks.length === 1) cpuAtFirst = process.cpuUsage();
  });
  const redisBefore = await commandStats(client);
  await orchestrator.run({ principal: USER, goal, taskId });
  const cpu = process.cpuUsage(cpuAtFirst);
  const redis = scriptStats(redisBefore, await commandStats(client));
  await orchestrator.close();
  const perSave = (step: number) => acks[step - 1]!.bytes - acks[step - 2]!.bytes;
  const steps = acks.length - 1;
  const wallMs = acks.at(-1)!.at - acks[0]!.at;
  return {
    steps: acks.length,
    savesPerTurn: acks.length / Number(goal.slice('turns:'.length)),
    stepsPerSecond: steps / (wallMs / 1000),
    bytesAt10: perSave(10),
    bytesAt200: perSave(200),
    bytesAt1000: perSave(1_000),
    bytesAtLast: perSave(acks.length),
    phases: {
      wallUs: (wallMs * 1000) / steps,
      cpuUs: (cpu.user + cpu.system) / steps,
      redisScriptUs: redis.usPerCall,
    },
  };
}

async function runManyTasks(orchestrator: Orchestrator, client: Redis, count: number, goal: string) {
  let steps = 0;
  let first = 0;
  let last = 0;
  let cpuAtFirst = process.cpuUsage();
  orchestrator.onSaved(() => {
    last = performance.now();
    if (steps++ === 0) {
      first = last;
      cpuAtFirst = process.cpuUsage();
    }
  });
  const ids = Array.from({ length: count }, (_, i) => `many-${i}`);
  const redisBefore = await commandStats(client);
  await Promise.all(ids.map((taskId) => orchestrator.start({ principal: USER, goal, taskId })));
  await Promise.all(ids.map((taskId) => orchestrator.settled(taskId)));
  const cpu = process.cpuUsage(cpuAtFirst);
  const redis = scriptStats(redisBefore, await commandStats(client));
  await orchestrator.close();
  const wallMs = last - first;
  return {
    steps,
    savesPerTurn: steps / (count * Number(goal.slice('turns:'.length))),
    stepsPerSecond: (steps - 1) / (wallMs / 1000),
    phases: {
      wallUs: (wallMs * 1000) / (steps - 1),
      cpuUs: (cpu.user + cpu.system) / (steps - 1),
      redisScriptUs: redis.usPerCall,
      redisBusy: redis.totalUs / (wallMs * 1000),
    },
  };
}

/** Steps/s of `count` tasks of `turns` turns on a store that acknowledges every save at once: the runtime's own cost. */
async function runtimeAlone(options: OrchestratorOptions, count: number, turns: number) {
  const instant: TaskStore = {
    kind: 'instant',
    save: async () => {},
    load: async () => null,
    list: async () => [],
    readJournal: async () => [],
    quarantine: async () => {},
    quarantined: async () => null,
    close: async () => {},
  };
  const orchestrator = createOrchestrator({ ...options, store: instant });
  const cpu = process.cpuUsage();
  const start = performance.now();
  const ids = Array.from({ length: count }, (_, i) => `alone-${i}`);
  await Promise.all(ids.map((taskId) => orchestrator.run({ principal: USER, goal: `turns:${turns}`, taskId })));
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  await orchestrator.close();
  return { turnsPerSecond: (count * turns) / seconds, cpuUsPerTurn: (used.user + used.system) / (count * turns) };
}

/** Sequential saves of a copy of `taskId`'s final envelope, each appending 3 audit and 1 transcript entries. */
async function isolatedSaves(store: RedisStore, client: Redis, taskId: string) {
  const source = (await store.load(taskId))!;
  const entry = { at: source.updatedAt, turn: 1, kind: 'gate', gate: 'schema', decision: 'pass', callId: 'c1', tool: 'noop', code: null, summary: 'arguments match the input schema' };
  let revision = 0;
  const saveNext = () => {
    revision += 1;
    const journal = { audit: 3 * (revision - 1), transcript: revision - 1 };
    return store.save({
      envelope: { ...source, taskId: 'isolated', revision, journal: { audit: journal.audit + 3, transcript: journal.transcript + 1 }, summary: { ...source.summary, taskId: 'isolated', revision } },
      expectedRevision: revision - 1,
      append: { audit: [entry, entry, entry], transcript: [entry] },
    });
  };
  for (let i = 0; i < 200; i++) await saveNext();
  const before = await commandStats(client);
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < BARE_SETS; i++) await saveNext();
  const wallUs = ((performance.now() - start) * 1000) / BARE_SETS;
  const used = process.cpuUsage(cpu);
  return { wallUs, cpuUs: (used.user + used.system) / BARE_SETS, redisUs: scriptStats(before, await commandStats(client)).usPerCall };
}

type CommandStats = Map<string, { calls: number; usec: number }>;

/** INFO commandstats (read-only; counts since the server started or its stats were last reset). */
async function commandStats(client: Redis): Promise<CommandStats> {
  const stats: CommandStats = new Map();
  for (const match of (await client.info('commandstats')).matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)) {
    stats.set(match[1]!, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return stats;
}

/** Server-side time of the save script (EVALSHA) between two readings. */
function scriptStats(before: CommandStats, after: CommandStats, command = 'evalsha') {
  const calls = (after.get(command)?.calls ?? 0) - (before.get(command)?.calls ?? 0);
  const totalUs = (after.get(command)?.usec ?? 0) - (before.get(command)?.usec ?? 0);
  return { calls, totalUs, usPerCall: calls > 0 ? totalUs / calls : 0 };
}

/** The same bytes with plain SETs: one at a time, and pipelined in batches as many as the concurrent tasks. */
async function bareSets(client: Redis, payload: string) {
  const key = `{${prefix}}:bare`;
  for (let i = 0; i < 200; i++) await client.set(key, payload); // warm-up
  const before = await commandStats(client);
  const cpu = process.cpuUsage();
  let start = performance.now();
  for (let i = 0; i < BARE_SETS; i++) await client.set(key, payload);
  const sequential = BARE_SETS / ((performance.now() - start) / 1000);
  const used = process.cpuUsage(cpu);
  const server = scriptStats(before, await commandStats(client), 'set');
  const batches = (BARE_SETS * 4) / CONCURRENT_TASKS;
  start = performance.now();
  for (let b = 0; b < batches; b++) {
    const pipeline = client.pipeline();
    for (let i = 0; i < CONCURRENT_TASKS; i++) pipeline.set(`${key}:${i}`, payload);
    await pipeline.exec();
  }
  const pipelined = (BARE_SETS * 4) / ((performance.now() - start) / 1000);
  return { sequential, pipelined, roundTripUs: 1e6 / sequential, cpuUs: (used.user + used.system) / BARE_SETS, serverUs: server.usPerCall };
}

/** Builds a task of RESUME_TASK_STEPS+ saves left in flight, then times close → resume → first save. */
async function resumeLatency(options: OrchestratorOptions, control: Control, stepsPerTurn: number) {
  control.hangFrom = Math.ceil(RESUME_TASK_STEPS / stepsPerTurn) + 1;
  const resting = new Promise<void>((resolve) => (control.onHang = resolve));
  let orchestrator = createOrchestrator(options);
  let steps = 0;
  orchestrator.onSaved(() => steps++);
  await orchestrator.start({ principal: USER, goal: `turns:${control.hangFrom * 10}`, taskId: 'resume' });
  // The model is called only once the state before it is durable: from here on the task rests, in flight.
  await resting;
  control.hangFrom = Number.POSITIVE_INFINITY;
  const total = steps;
  const samples: number[] = [];
  for (let i = 0; i < RESUMES + 5; i++) {
    await orchestrator.close();
    orchestrator = createOrchestrator(options);
    const firstSave = new Promise<number>((resolve) => orchestrator.onSaved(() => resolve(performance.now())));
    const start = performance.now();
    await orchestrator.resume('resume');
    const ms = (await firstSave) - start;
    if (i >= 5) samples.push(ms); // the first few warm up the restore path
  }
  await orchestrator.close();
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.ceil(q * samples.length) - 1)]!;
  return { steps: total, p50: at(0.5), p99: at(0.99) };
}

/** Starts WAITING_TASKS tasks that end up waiting for a confirmation; Redis and Node memory before and after. */
async function waitingMemory(orchestrator: Orchestrator, client: Redis) {
  const startWaiting = async (from: number, count: number) => {
    const batch = 200;
    for (let i = from; i < from + count; i += batch) {
      const ids = Array.from({ length: Math.min(batch, from + count - i) }, (_, j) => `wait-${i + j}`);
      const settled = await Promise.all(ids.map((taskId) => orchestrator.run({ principal: USER, goal: 'wait', taskId })));
      if (settled.some((s) => s.state !== 'waiting_for_confirmation')) throw new Error('a bench task did not wait');
      if ((i - from) % 2_000 === 0 && i > from) progress(`  ${i - from} waiting`);
    }
  };
  await startWaiting(0, 2_000); // warm-up: compiled code, pools and caches exist before the baseline
  const redisBefore = await usedMemory(client);
  const nodeBefore = await settledMemory();
  await startWaiting(2_000, WAITING_TASKS);
  const redisAfter = await usedMemory(client);
  const nodeAfter = await settledMemory();
  await orchestrator.close();
  const heapDelta = nodeAfter.heapUsed - nodeBefore.heapUsed;
  const rssDelta = nodeAfter.rss - nodeBefore.rss;
  return {
    redisPerTask: (redisAfter - redisBefore) / WAITING_TASKS,
    heapDelta,
    rssDelta,
    heapPerTask: heapDelta / WAITING_TASKS,
    rssPerTask: rssDelta / WAITING_TASKS,
  };
}

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

/** Memory after full collections (and a pause for pending callbacks to drop their references). */
async function settledMemory(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
  }
  return process.memoryUsage();
}

/** `gc()` without needing `node --expose-gc`. */
function exposeGc(): () => void {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

type Row = [measure: string, value: string, reference: string, ratio: string, target: string, met: boolean | null];

function table(rows: Row[]): string {
  const lines = [
    '| measure | value | against | ratio | target | met |',
    '| --- | ---: | --- | ---: | --- | :---: |',
    ...rows.map(([m, v, r, q, t, ok]) => `| ${m} | ${v} | ${r} | ${q} | ${t} | ${ok === null ? '' : ok ? 'yes' : 'no'} |`),
  ];
  return lines.join('\n');
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`;
const signedKb = (bytes: number) => `${bytes >= 0 ? '+' : ''}${(bytes / 1024).toFixed(0)} KB`;

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
