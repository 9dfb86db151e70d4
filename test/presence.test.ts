/**
 * Pause on disconnect: the host says the task's user went away; the task finishes what runs, then waits (persisted)
 * before its next model turn and before any write, resumes when the user is back, and is cancelled (its writes undone)
 * when the pause outlasts the policy's awayTtlMs. Only the task's own user's presence counts.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { dueEvent } from '../src/orchestrator/expirySweeper.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { reply } from '../src/testing/scriptedModel.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { defineTool } from '../src/tool.js';
import { E17, byKind, harness, reserveArgs, until } from './support/harness.js';

/** A read whose answer waits until the test releases it: the user leaves while it runs. */
function slowRead() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started = 0;
  const tool = defineTool({
    name: 'check_calendar',
    description: 'Reads the calendar.',
    effect: 'read',
    scopes: ['rooms:read'],
    input: z.strictObject({ day: z.string() }),
    output: z.strictObject({ free: z.boolean() }),
    timeoutMs: 60_000,
    async execute() {
      started += 1;
      await gate;
      return { ok: true, value: { free: true } };
    },
  });
  return { tool, release: () => release(), started: () => started };
}

describe('a user who goes away', () => {
  it('lets the running read finish, then pauses before the next model turn, and resumes when they are back', async () => {
    const read = slowRead();
    let turns = 0;
    const h = harness({
      extraTools: [read.tool],
      script: [
        () => ((turns += 1), reply.call('check_calendar', { day: 'mon' })),
        () => ((turns += 1), reply.answer('Monday is free.')),
      ],
    });
    await h.orchestrator.start({ principal: E17, goal: 'is Monday free?', taskId: 'away' });
    await until(() => read.started() === 1);
    const left = await h.orchestrator.userLeft('away', E17);
    expect(left).toMatchObject({ accepted: true });
    read.release();
    await until(async () => (await h.orchestrator.status('away')).state === 'paused');
    expect(turns).toBe(1);
    const paused = await h.orchestrator.status('away');
    expect(paused.stateValue).toBe('paused');
    expect(paused.observations).toEqual([expect.objectContaining({ tool: 'check_calendar', ok: true })]);

    const back = await h.orchestrator.userReturned('away', E17);
    expect(back).toMatchObject({ accepted: true });
    const done = await h.orchestrator.settled('away');
    expect(done.state).toBe('answered');
    expect(turns).toBe(2);
    const audit = await h.orchestrator.audit('away');
    expect(byKind(audit, 'presence').map((e) => e.action)).toEqual(['left', 'paused', 'resumed']);
    // The replay walks through the pause along the chart's own states.
    expect(replayAudit(audit).visited).toEqual(expect.arrayContaining(['paused', 'deciding']));
  });

  it('runs no write while the user is away, even one the model proposed before they left', async () => {
    const read = slowRead();
    const h = harness({
      extraTools: [read.tool],
      script: [
        reply.calls({ name: 'check_calendar', args: { day: 'mon' } }, { name: 'reserve_room', args: reserveArgs() }),
        reply.answer('booked'),
      ],
    });
    await h.orchestrator.start({ principal: E17, goal: 'book if free', taskId: 'write' });
    await until(() => read.started() === 1);
    await h.orchestrator.userLeft('write', E17);
    read.release();
    await until(async () => (await h.orchestrator.status('write')).state === 'paused');
    expect((await h.orchestrator.status('write')).stateValue).toBe('executing.pausedBeforeWrite');
    expect(h.bookings.reserveRequests).toEqual([]);

    await h.orchestrator.userReturned('write', E17);
    const status = await h.orchestrator.settled('write');
    expect(h.bookings.reserveRequests).toHaveLength(1);
    expect(status.state).toBe('answered');
    const replayed = replayAudit(await h.orchestrator.audit('write'));
    expect(replayed.visited).toEqual(expect.arrayContaining(['executing.pausedBeforeWrite', 'executing.writing']));
  });

  it('is cancelled with user_away when the pause outlasts awayTtlMs, delivered by the sweep', async () => {
    const clock = new ManualClock();
    const read = slowRead();
    const h = harness({
      clock,
      expirySweepMs: 0,
      policy: { awayTtlMs: 60_000 },
      extraTools: [read.tool],
      script: [reply.call('check_calendar', { day: 'mon' }), reply.answer('x')],
    });
    await h.orchestrator.start({ principal: E17, goal: 'is Monday free?', taskId: 'gone' });
    await until(() => read.started() === 1);
    await h.orchestrator.userLeft('gone', E17);
    read.release();
    await until(async () => (await h.orchestrator.status('gone')).state === 'paused');
    const stored = await h.store.load('gone');
    expect(stored?.summary.wakeAt).toBe(clock.now() + 60_000);
    // Not yet due: the sweep delivers nothing.
    expect(await h.orchestrator.expireDue()).toBe(0);
    await clock.advance(60_000);
    expect(await h.orchestrator.expireDue()).toBe(1);
    const status = await h.orchestrator.settled('gone');
    expect(status.state).toBe('cancelled');
    expect(status.outcome?.reason.code).toBe('user_away');
  });

  it('survives a restart while paused', async () => {
    const store = new MemoryStore();
    const read = slowRead();
    const first = harness({ store, extraTools: [read.tool], script: [reply.call('check_calendar', { day: 'mon' })] });
    await first.orchestrator.start({ principal: E17, goal: 'is Monday free?', taskId: 'restart' });
    await until(() => read.started() === 1);
    await first.orchestrator.userLeft('restart', E17);
    read.release();
    await until(async () => (await first.orchestrator.status('restart')).state === 'paused');
    await first.orchestrator.close();

    const second = harness({
      store,
      extraTools: [slowRead().tool],
      // The script is by turn: the second turn answers.
      script: [reply.call('check_calendar', { day: 'mon' }), reply.answer('Monday is free.')],
    });
    expect((await second.orchestrator.status('restart')).state).toBe('paused');
    await second.orchestrator.userReturned('restart', E17);
    expect((await second.orchestrator.settled('restart')).state).toBe('answered');
  });

  it("takes only the task user's own presence, and says when they were not away", async () => {
    const read = slowRead();
    const h = harness({
      extraTools: [read.tool],
      script: [reply.call('check_calendar', { day: 'mon' }), reply.answer('x')],
    });
    await h.orchestrator.start({ principal: E17, goal: 'is Monday free?', taskId: 'who' });
    await until(() => read.started() === 1);
    const other = { ...E17, userId: 'E42' };
    expect(await h.orchestrator.userLeft('who', other)).toMatchObject({ accepted: false, code: 'wrong_user' });
    expect(await h.orchestrator.userReturned('who', E17)).toMatchObject({ accepted: false, code: 'not_away' });
    read.release();
    expect((await h.orchestrator.settled('who')).state).toBe('answered');
  });

  it('gives the sweep a timer only for a paused task whose pause is due', () => {
    const context = { away: { since: 0, expiresAt: 1_000 } } as never;
    expect(dueEvent(context, 'paused', 999)).toBeNull();
    expect(dueEvent(context, 'paused', 1_000)).toEqual({ type: 'timer.awayExpired', at: 1_000 });
    expect(dueEvent(context, 'running', 5_000)).toBeNull();
  });
});
