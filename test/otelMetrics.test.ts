/**
 * Fleet metrics: `orchestrator.stats()` counts what a process holds and what it did (take-overs, capacity
 * refusals by reason), and `otelMetrics` observes exactly those on the host's OpenTelemetry meter, under the names
 * `FLEET_METRICS` lists, only when the host's reader collects.
 */
import { describe, expect, it } from 'vitest';
import { CapacityError } from '../src/errors.js';
import { FLEET_METRICS, otelMetrics } from '../src/otel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { CASH_GOAL, CLERK, cashDesk } from './support/domain.js';
import { E17 } from './support/harness.js';
import { recordingMeter } from './support/recordingMeter.js';
import { noteWriter, readThenWrite, slowRead } from './support/takeover.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';

describe('fleet metrics', () => {
  it('observe stats() under the listed names, and stop when told', async () => {
    const { meter, instruments, collect, callbacks } = recordingMeter();
    const read = slowRead('gate');
    const busy = createOrchestrator({
      tools: [read.tool('x'), noteWriter().tool],
      model: readThenWrite(),
      store: new MemoryStore(),
      capacity: { maxRunningPerTenant: 1 },
      expirySweepMs: 0,
    });
    const stop = otelMetrics(meter, busy, { 'service.instance.id': 'test-1' });
    expect([...instruments.values()].map((i) => i.name).sort()).toEqual(Object.keys(FLEET_METRICS).sort());
    expect(await collect()).toMatchObject({
      'statechart_agent.tasks.live': 0,
      'statechart_agent.starts.refused{tenant}': 0,
    });

    // One task runs (its read waits); a second start of the tenant is refused.
    await busy.start({ principal: E17, goal: 'read', taskId: 'a' });
    await expect(busy.start({ principal: E17, goal: 'read', taskId: 'b' })).rejects.toBeInstanceOf(CapacityError);
    expect(await collect()).toEqual({
      'statechart_agent.tasks.live': 1,
      'statechart_agent.leases.held': 1,
      'statechart_agent.event_loop.delay': expect.any(Number),
      'statechart_agent.recoveries': 0,
      'statechart_agent.quarantines': 0,
      'statechart_agent.starts.refused{process}': 0,
      'statechart_agent.starts.refused{tenant}': 1,
      'statechart_agent.starts.refused{loop_delay}': 0,
      'statechart_agent.starts.refused{starting}': 0,
      'statechart_agent.starts.refused{tenant_cap}': 0,
      'statechart_agent.starts.underway': 0,
    });
    // No dispatch: no queue to report, so the queue gauges observe nothing.
    expect(await busy.queueStats()).toBeNull();
    stop();
    expect(callbacks.size).toBe(0);
    read.release();
    await busy.close();
  });

  it('count the tasks a process took over', async () => {
    const store = new MemoryStore();
    const read = slowRead('gate');
    const notes = noteWriter();
    const options = { model: readThenWrite(), store, expirySweepMs: 0, orphanSweepMs: 0 };
    const first = createOrchestrator({ ...options, tools: [read.tool('first'), notes.tool] });
    await first.start({ principal: E17, goal: 'read', taskId: 't1' });
    await first.start({ principal: E17, goal: 'read', taskId: 't2' });
    await first.close(); // hands the leases back
    const second = createOrchestrator({ ...options, model: readThenWrite(), tools: [read.tool('second'), notes.tool] });
    expect((await second.recover()).resumed.sort()).toEqual(['t1', 't2']);
    expect(second.stats()).toMatchObject({ recovered: 2, quarantined: 0, live: 2 });
    read.release();
    await second.settled('t1');
    await second.settled('t2');
    await second.close();
  });

  it('are plain stats without OpenTelemetry', async () => {
    const { orchestrator } = cashDesk({ script: [] });
    await orchestrator.start({ principal: CLERK, goal: CASH_GOAL }).catch(() => {});
    expect(Object.keys(orchestrator.stats()).sort()).toEqual(
      ['leases', 'live', 'loopDelayMs', 'quarantined', 'recovered', 'refused', 'starting'].sort(),
    );
    await orchestrator.close();
  });
});
