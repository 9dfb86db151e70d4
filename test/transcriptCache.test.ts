/**
 * A live task reads its committed transcript from the store at most once, when a model turn first asks: every save
 * appends what it made durable to what the task keeps, so a model that reads the whole history every turn does not make each turn read more.
 * What the model sees is still, every turn, the store's transcript plus what no save has committed yet.
 */
import { describe, expect, it } from 'vitest';
import type { AgentModel } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { JournalStream } from '../src/store/taskStore.js';
import { reply } from '../src/testing/index.js';
import { BOOKING_GOAL, E17, MEETING, harness } from './support/harness.js';

class CountingStore extends MemoryStore {
  transcriptReads = 0;
  override readJournal(taskId: string, stream: JournalStream, from?: number, to?: number): Promise<unknown[]> {
    if (stream === 'transcript') this.transcriptReads += 1;
    return super.readJournal(taskId, stream, from, to);
  }
}

/** Asks a question on turn 1, then reads four times (each time for more people), then answers; keeps what it saw of the transcript each turn. */
function readingModel(seen: string[][]): AgentModel {
  return {
    name: 'reads-its-history',
    decide: async (request) => {
      seen.push((await request.transcript()).map((entry) => JSON.stringify(entry)));
      if (request.turn === 1) return reply.ask('Which building?');
      if (request.turn <= 5) return reply.call('find_available_rooms', { ...MEETING, attendees: 3 + request.turn }, `call_${request.turn}`);
      return reply.answer('nothing suitable');
    },
  };
}

describe('the transcript a model turn reads', () => {
  it('is read from the store once per live task, and every turn sees the whole history', async () => {
    const store = new CountingStore();
    const seen: string[][] = [];
    const h = harness({ store, model: readingModel(seen) });
    const waiting = await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'tc' });
    expect(waiting.state).toBe('waiting_for_user');
    expect(store.transcriptReads).toBe(1);
    // The answer restores the task from the store (it was dropped from memory at rest): one read for five turns.
    await h.orchestrator.answer('tc', E17, 'Main');
    const done = await h.orchestrator.settled('tc');
    expect(done.state).not.toBe('running');
    expect(seen).toHaveLength(6);
    expect(store.transcriptReads).toBe(2);
    const stored = (await store.readJournal('tc', 'transcript')).map((entry) => JSON.stringify(entry));
    for (const [turn, view] of seen.entries()) {
      // Each turn saw a prefix of the final transcript, longer than the turn before.
      expect(view).toEqual(stored.slice(0, view.length));
      if (turn > 0) expect(view.length).toBeGreaterThan(seen[turn - 1]!.length);
    }
    expect(seen.at(-1)!.at(-1)).toContain('"kind":"result"');
  });
});
