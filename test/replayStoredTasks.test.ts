/**
 * Time travel and the live page over a task stored before transitions were recorded (the agent/7 fixture, waiting
 * for a confirmation): the journal has no record of the state between steps, so the replay says so (null) instead
 * of guessing, and its last step shows the state the task is in now.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';
import { rawRows } from './support/rawRows.js';
import { openTaskEvents } from './support/sseClient.js';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'envelopes', 'agent-7', 'waiting-for-confirmation.json');

let service: DemoService | null = null;
afterEach(() => service?.close());

async function serviceWithStoredTask() {
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as {
    envelope: { taskId: string; revision: number; summary: unknown };
    audit: unknown[];
    transcript: unknown[];
  };
  const store = new MemoryStore();
  rawRows(store).set(fixture.envelope.taskId, {
    envelope: JSON.stringify(fixture.envelope),
    revision: fixture.envelope.revision,
    summary: fixture.envelope.summary,
    audit: fixture.audit.map((e) => JSON.stringify(e)),
    transcript: fixture.transcript.map((e) => JSON.stringify(e)),
  });
  service = await createDemoService({ store, clock: new ManualClock(1_790_398_800_000), expirySweepMs: 0 });
  return { taskId: fixture.envelope.taskId, entries: fixture.audit.length };
}

describe('a task stored before transitions were recorded', () => {
  it('replays with the state unknown between steps and the current state at the last step', async () => {
    const { taskId, entries } = await serviceWithStoredTask();
    const at = async (n: number) => {
      const response = await service!.app.inject({
        method: 'GET',
        url: `/api/tasks/${taskId}/replay?at=${n}`,
        headers: { authorization: 'Bearer E17' },
      });
      expect(response.statusCode).toBe(200);
      return response.json().replay as { state: string | null; status: string; recorded: boolean };
    };
    expect(await at(3)).toMatchObject({ state: null, recorded: false });
    expect(await at(entries)).toMatchObject({
      state: 'executing.awaitingConfirmation',
      status: 'waiting_for_confirmation',
      recorded: false,
    });
  });

  it('streams its entries on the live page with the current state after the last one', async () => {
    const { taskId, entries } = await serviceWithStoredTask();
    await service!.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = service!.app.server.address() as AddressInfo;
    const stream = openTaskEvents(`http://127.0.0.1:${port}`, taskId, {
      token: 'E17',
      until: (events) => events.some((e) => e.data.seq === entries - 1 && e.event !== 'status'),
    });
    await stream.done;
    const perEntry = stream.events.filter((e) => e.event !== 'status' && e.data.seq !== undefined);
    expect(perEntry).toHaveLength(entries);
    expect(perEntry.slice(0, -1).every((e) => e.data.state === null)).toBe(true);
    expect(perEntry.at(-1)!.data).toMatchObject({
      state: 'executing.awaitingConfirmation',
      status: 'waiting_for_confirmation',
    });
  });
});
