/**
 * The step CLI (src/cli/step.ts), run as a child process with piped input against a refund task left waiting for
 * its confirmation in a temporary file store. Checked on its output and on the store afterwards.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../machines/journal.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import {
  BOOKING_GOAL,
  BOOKING_SUCCESS,
  E17,
  REFUND_GOAL,
  REFUND_SUCCESS,
  bookingScript,
  refundScript,
} from '../examples/booking/scenarios.js';
import { BookingService } from '../examples/booking/bookingService.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { SUPPORT, byKind, harness } from './support/harness.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const pool = new ChildPool();
afterEach(() => pool.killAll());

let dir: string;

/** Runs the CLI with `input` on stdin (then end of input); resolves when it exits. */
const step = (args: string[], input: string) =>
  pool.run('src/cli/step.ts', [...args, '--host', './examples/booking/host.ts', '--data-dir', dir], { input });

async function stored(taskId: string) {
  const store = new FileStore(dir);
  try {
    const envelope = (await store.load(taskId))!;
    const audit = (await store.readJournal(taskId, 'audit', 0, envelope.journal.audit)) as AuditEntry[];
    return { envelope, audit, context: envelope.snapshot.context };
  } finally {
    await store.close();
  }
}

/** A refund task waiting for the confirmation of the 999.00 the model proposed. */
async function waitingRefund(taskId: string) {
  const { orchestrator } = harness({ store: new FileStore(dir), script: refundScript() });
  const status = await orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, success: REFUND_SUCCESS, taskId });
  expect(status.state).toBe('waiting_for_confirmation');
  await orchestrator.close();
  return status;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'step-cli-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('step CLI', () => {
  describe('on a refund waiting for confirmation', () => {
    let pending: { id: string; argsHash: string };
    let auditBefore: AuditEntry[];

    beforeAll(async () => {
      const status = await waitingRefund('refund-step');
      pending = status.pendingConfirmation!;
      auditBefore = (await stored('refund-step')).audit;
    });

    it(
      'shows the state, the pending confirmation and the allowed events, then the past at step 3, then confirms',
      async () => {
        const { code, out, transcript } = await step(['refund-step'], 'at 3\nnext\nconfirm\nquit\n');
        expect(code, transcript).toBe(0);
        // The current state, as loaded.
        expect(out).toMatch(
          /^task {6}refund-step · waiting_for_confirmation \(executing\.awaitingConfirmation\) · revision \d+ · turn 2/m,
        );
        expect(out).toMatch(/^confirm {3}Refund 999\.00 on order O-1001/m);
        expect(out).toContain(`id ${pending.id} · by E17 · args ${pending.argsHash}`);
        expect(out).toMatch(/^budget {4}modelTurns 2\/12 · toolCalls 1\/24 · writes 0\/4/m);
        expect(out).toMatch(/^events {4}confirm · reject \[reason\] · cancel \[reason\] · at <N> · quit$/m);
        // at 3: started, budget checked, model turn 1 requested: thinking, nothing spent but the reservation.
        const at3 = out.slice(out.indexOf('> at 3'), out.indexOf('> next'));
        expect(at3).toContain(`at 3 of ${auditBefore.length}`);
        expect(at3).toMatch(/^ {2}state {5}thinking · running · turn 1$/m);
        expect(at3).toMatch(
          /^ {2}budget {4}modelTurns 1\/12 · toolCalls 0\/24 · writes 0\/4 · retries 0\/8 · tokens 1000\/200000/m,
        );
        expect(at3).toMatch(/^ {2}pending {3}\(no confirmation pending\)$/m);
        expect(at3).toMatch(/^ {2}path {6}deciding → thinking$/m);
        expect(replayAudit(auditBefore, 3).state).toBe('thinking');
        // next is refused while the task waits for a human.
        expect(out).toContain('next is not allowed now (waiting_for_confirmation, executing.awaitingConfirmation)');
        // confirm: accepted, the refund runs once, then the model's next turn waits for `next`.
        expect(out).toContain('confirm → accepted: confirmed; the call runs now');
        expect(out).toMatch(/^task {6}refund-step · running \(thinking\) · revision \d+ · turn 3/m);
        expect(out).toMatch(
          /^last {6}refund_order ok \{"amount_cents":99900,"order_id":"O-1001","refund_id":"TX-9001","status":"succeeded"\}$/m,
        );
        expect(out).toMatch(/^rows {6}refund TX-9001 O-1001 999\.00 by E17$/m);
        expect(out).toMatch(/^events {4}next · cancel \[reason\] · at <N> · quit$/m);
        expect(out).toMatch(/^bye: refund-step stays running \(thinking\)/m);

        // Persisted: the confirmation, the one write and its result, and the task waiting in `thinking` for its model.
        const after = await stored('refund-step');
        expect(after.envelope.summary).toMatchObject({ state: 'running', stateValue: 'thinking' });
        expect(
          byKind(after.audit, 'confirmation').map((e) => `${e.action} ${e.confirmationId} ${e.userId ?? ''}`.trim()),
        ).toEqual([`requested ${pending.id}`, `granted ${pending.id} E17`]);
        const writes = byKind(after.audit, 'tool_started').filter((e) => e.effect === 'write');
        expect(writes).toHaveLength(1);
        expect(writes[0]).toMatchObject({
          tool: 'refund_order',
          argsHash: pending.argsHash,
          confirmationId: pending.id,
        });
        expect(byKind(after.audit, 'tool_finished').map((e) => `${e.tool} ${e.code}`)).toEqual([
          'get_order ok',
          'refund_order ok',
        ]);
        expect(after.context.evidence).toEqual([
          expect.objectContaining({ tool: 'refund_order', fields: { status: 'succeeded', refund_id: 'TX-9001' } }),
        ]);
      },
      scaled(30_000),
    );

    it(
      'resumes the running task and lets the model finish it with next, without running the refund again',
      async () => {
        const { code, out, transcript } = await step(['refund-step'], 'next\n');
        expect(code, transcript).toBe(0);
        expect(out).toContain('the task was left running (thinking): resuming it here');
        expect(out).toContain('model     its turn waits for you');
        expect(out).toContain('next → model turn 3 released');
        expect(out).toMatch(/^task {6}refund-step · done \(done\)/m);
        expect(out).toMatch(
          /^outcome {3}done: goal_met \(goal met: refund_order returned status=succeeded, refund_id=TX-9001\)$/m,
        );
        expect(out).toMatch(/^answer {4}Refunded 999\.00 on O-1001 \(TX-9001\)\.$/m);
        // This process wrote nothing: the refund happened once, in the previous one.
        expect(out).toMatch(/^rows {6}\(none written\)$/m);
        expect(out).toMatch(/^events {4}at <N> · quit$/m);

        const after = await stored('refund-step');
        expect(after.envelope.summary).toMatchObject({ state: 'done', outcomeCode: 'goal_met' });
        expect(byKind(after.audit, 'tool_started').filter((e) => e.effect === 'write')).toHaveLength(1);
        expect(byKind(after.audit, 'model_output').map((e) => e.output)).toEqual([
          'model.toolsProposed',
          'model.toolsProposed',
          'model.answered',
        ]);
      },
      scaled(30_000),
    );

    it(
      'prints the task at a past step with --at, including the confirmation it was waiting for',
      async () => {
        const { audit } = await stored('refund-step');
        const n = audit.findIndex((e) => e.kind === 'confirmation' && e.action === 'requested') + 1;
        const { code, out, transcript } = await step(['refund-step', '--at', String(n)], '');
        expect(code, transcript).toBe(0);
        expect(out).toContain(`at ${n} of ${audit.length}`);
        expect(out).toMatch(/^ {2}state {5}executing\.awaitingConfirmation · waiting_for_confirmation · turn 2$/m);
        expect(out).toContain(`pending   ${pending.id} for refund_order · args ${pending.argsHash}`);
        expect(out).toMatch(/^ {2}results {3}refund_order → not run yet$/m);
        expect(out).toMatch(/t2 {2}gates {4}refund_order schema ✓ mandate ✓ business ✓ permission ✓/);
        // Then the present: done.
        expect(out).toMatch(/^task {6}refund-step · done \(done\)/m);
      },
      scaled(30_000),
    );
  });

  it(
    'steps a whole session: reject the 999.00, let the model propose 199.00, confirm it, finish',
    async () => {
      await waitingRefund('refund-session');
      const { code, out, transcript } = await step(
        ['refund-session'],
        'reject the customer asked for 199.00\nnext\nconfirm\nnext\n',
      );
      expect(code, transcript).toBe(0);
      expect(out).toContain('reject → accepted: rejected; the call will not run and the model is told');
      expect(out).toMatch(
        /^last {6}refund_order confirmation_rejected: the call was rejected by E17: the customer asked for 199\.00; it was not run$/m,
      );
      expect(out).toContain('next → model turn 3 released');
      expect(out).toMatch(/^confirm {3}Refund 199\.00 on order O-1001 \(projector arrived broken\)$/m);
      expect(out).toContain('confirm → accepted: confirmed; the call runs now');
      expect(out).toContain('next → model turn 4 released');
      expect(out).toMatch(/^outcome {3}done: goal_met/m);
      expect(out).toMatch(/^rows {6}refund TX-9001 O-1001 199\.00 by E17$/m);

      const after = await stored('refund-session');
      expect(after.envelope.summary).toMatchObject({ state: 'done', outcomeCode: 'goal_met' });
      const writes = byKind(after.audit, 'tool_started').filter((e) => e.effect === 'write');
      expect(writes.map((w) => (w.args as { amount_cents: number }).amount_cents)).toEqual([19_900]);
      expect(byKind(after.audit, 'confirmation').map((e) => e.action)).toEqual([
        'requested',
        'rejected',
        'requested',
        'granted',
      ]);
    },
    scaled(30_000),
  );

  it(
    'refuses a confirmation from another user (--as) and leaves the task waiting',
    async () => {
      await waitingRefund('refund-other');
      const { code, out, transcript } = await step(['refund-other', '--as', 'E99'], 'confirm\n');
      expect(code, transcript).toBe(0);
      expect(out).toContain('confirm → refused (wrong_user)');
      expect(out).toMatch(/^bye: refund-other stays waiting_for_confirmation/m);
      const after = await stored('refund-other');
      expect(byKind(after.audit, 'tool_started').filter((e) => e.effect === 'write')).toHaveLength(0);
    },
    scaled(30_000),
  );

  it(
    'lets a reviewer (--as with --scopes) resolve a held write, after the task user could not',
    async () => {
      // A booking whose response is lost and whose lookups fail: it waits for a reviewer.
      const bookings = new BookingService();
      bookings.faults.loseNextReserveResponse = true;
      bookings.findByIdempotencyKey = async () => {
        throw new Error('booking index unavailable');
      };
      const { orchestrator } = harness({ store: new FileStore(dir), bookings, script: bookingScript() });
      const held = await orchestrator.run({
        principal: E17,
        goal: BOOKING_GOAL,
        success: BOOKING_SUCCESS,
        taskId: 'held',
      });
      expect(held.state).toBe('review_required');
      await orchestrator.close();
      const user = await step(['held'], 'resolve not_happened\n');
      expect(user.out).toMatch(/^review {4}reserve_room \(call_2_1\) · write_outcome_unknown · key idem_/m);
      expect(user.out).toMatch(
        /^events {4}resolve happened <result json> \| not_happened \[note\] \| retry \[note\] · at <N> · quit$/m,
      );
      expect(user.out).toContain('resolve → refused (not_a_reviewer)');
      const reviewer = await step(
        ['held', '--as', 'R2', '--scopes', 'tasks:review'],
        'resolve retry the room system has no record\nnext\n',
      );
      expect(reviewer.code, reviewer.transcript).toBe(0);
      expect(reviewer.out).toContain(
        'resolve → accepted: resolved: the write is retried with the same idempotency key',
      );
      expect(reviewer.out).toMatch(/^outcome {3}done: goal_met/m);
      const after = await stored('held');
      expect(byKind(after.audit, 'review').map((r) => `${r.action} ${r.code} ${r.userId ?? '-'}`)).toEqual([
        'held write_outcome_unknown -',
        'refused not_a_reviewer E17',
        'resolved retry R2',
      ]);
    },
    scaled(30_000),
  );

  it(
    'explains a task it cannot find and a bad command line',
    async () => {
      const missing = await step(['no-such-task'], '');
      expect(missing.code, missing.transcript).toBe(1);
      expect(missing.err).toContain('Pass --store, --data-dir or --prefix');
      const usage = await step([], '');
      expect(usage.code, usage.transcript).toBe(2);
      expect(usage.err).toContain('step needs a task id');
      const hostless = await pool.run('src/cli/step.ts', ['refund-step', '--data-dir', dir], { input: '' });
      expect(hostless).toMatchObject({ code: 2, err: expect.stringContaining('step needs --host <module>') });
      const broken = await pool.run(
        'src/cli/step.ts',
        ['refund-step', '--host', './no/such/host.ts', '--data-dir', dir],
        { input: '' },
      );
      expect(broken).toMatchObject({
        code: 1,
        err: expect.stringContaining('cannot load the host module ./no/such/host.ts'),
      });
    },
    scaled(30_000),
  );
});
