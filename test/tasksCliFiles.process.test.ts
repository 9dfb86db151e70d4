/**
 * The tasks CLI (src/cli/tasks.ts), run as a child process against a prepared file store holding a finished booking
 * and a refund waiting for confirmation. Its `recover` on Redis is in tasksCli.process.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { REFUND_GOAL, REFUND_SUCCESS, refundScript, scenarios } from '../examples/booking/scenarios.js';
import type { AuditRecord } from '../src/orchestrator/orchestrator.js';
import type { TaskSummary } from '../src/store/envelope.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { SUPPORT, harness } from './support/harness.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const pool = new ChildPool();

const tasks = (args: string[], env: NodeJS.ProcessEnv = {}) => pool.run('src/cli/tasks.ts', args, { env });

afterEach(() => pool.killAll());

describe('tasks CLI on a file store', () => {
  let dir: string;
  let file: string[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tasks-cli-'));
    file = ['--data-dir', dir];
    await scenarios.normal({ store: new FileStore(dir) });
    const { orchestrator } = harness({ store: new FileStore(dir), script: refundScript() });
    const waiting = await orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      taskId: 'refund-wait',
    });
    expect(waiting.state).toBe('waiting_for_confirmation');
    await orchestrator.close();
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it(
    'lists the tasks, newest first, and filters by state',
    async () => {
      const all = await tasks(['list', ...file]);
      expect(all.code, all.transcript).toBe(0);
      const lines = all.out.split('\n');
      expect(lines[0]).toMatch(/^TASK\s+STATE\s+MACHINE STATE\s+REV\s+USER\s+UPDATED\s+OUTCOME$/);
      expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
        ['refund-wait', 'waiting_for_confirmation'],
        ['normal-1', 'done'],
      ]);
      const done = await tasks(['list', '--state', 'done', '--json', ...file]);
      expect((JSON.parse(done.out) as TaskSummary[]).map((t) => [t.taskId, t.outcomeCode])).toEqual([
        ['normal-1', 'goal_met'],
      ]);
    },
    scaled(30_000),
  );

  it(
    'shows a waiting task with its pending confirmation and budgets',
    async () => {
      const { code, out, transcript } = await tasks(['show', 'refund-wait', ...file]);
      expect(code, transcript).toBe(0);
      expect(out).toMatch(/^state\s+waiting_for_confirmation \(executing\.awaitingConfirmation\)/m);
      expect(out).toMatch(/^confirm\s+Refund 999\.00 on order O-1001/m);
      expect(out).toMatch(/id refund-wait\/t2\.c1\.r1, by E17, args sha256:[0-9a-f]{64}/);
      expect(out).toMatch(/^ {2}modelTurns\s+2 \/ 12\s+\(10\)$/m);
      expect(out).toMatch(/^outcome\s+\(not finished\)$/m);
    },
    scaled(30_000),
  );

  it(
    'shows the outcome of a finished task, also as JSON',
    async () => {
      const text = await tasks(['show', 'normal-1', ...file]);
      expect(text.out).toMatch(/^outcome\s+done: goal_met/m);
      expect(text.out).toMatch(/^answer\s+Booked R7 .* booking B204\.$/m);
      const json = await tasks(['show', 'normal-1', '--json', ...file]);
      expect(JSON.parse(json.out)).toMatchObject({
        taskId: 'normal-1',
        state: 'done',
        outcome: { reason: { code: 'goal_met' } },
      });
    },
    scaled(30_000),
  );

  it(
    'prints the audit trail as a trace, or its entries as JSON',
    async () => {
      const trace = await tasks(['audit', 'normal-1', ...file]);
      expect(trace.code, trace.transcript).toBe(0);
      expect(trace.out).toMatch(/t2 {2}write {4}reserve_room \{.*"expected_version":17,"room_id":"R7".* key idem_/);
      expect(trace.out).toMatch(/stop\s+done goal_met/);
      const json = await tasks(['audit', 'normal-1', '--json', ...file]);
      const entries = JSON.parse(json.out) as AuditRecord[];
      expect(entries[0]).toMatchObject({ seq: 0, kind: 'task_started' });
      expect(entries.at(-1)).toMatchObject({ kind: 'task_stopped', status: 'done' });
    },
    scaled(30_000),
  );

  it(
    'fails with a message for an unknown task, command or state',
    async () => {
      const missing = await tasks(['show', 'nope', ...file]);
      expect(missing).toMatchObject({ code: 1, err: expect.stringContaining('Task "nope" does not exist') });
      const command = await tasks(['frob', ...file]);
      expect(command).toMatchObject({ code: 2, err: expect.stringContaining('unknown command "frob"') });
      const state = await tasks(['list', '--state', 'asleep', ...file]);
      expect(state).toMatchObject({ code: 2, err: expect.stringContaining('unknown state "asleep"') });
      const hostless = await tasks(['recover', ...file]);
      expect(hostless).toMatchObject({ code: 2, err: expect.stringContaining('recover needs --host <module>') });
    },
    scaled(30_000),
  );
});
