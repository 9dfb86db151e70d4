/**
 * A live task reads its committed transcript from the store at most once, when a model turn first asks: every save
 * appends what it made durable to what the task keeps, so a model that reads the whole history every turn does not make each turn read more.
 * What the model sees is still, every turn, the store's transcript plus what no save has committed yet.
 */
import { describe, expect, it } from 'vitest';
import type { TranscriptEntry } from '../machines/journal.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { TaskTranscript } from '../src/runtime/taskTranscript.js';
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
      if (request.turn <= 5)
        return reply.call('find_available_rooms', { ...MEETING, attendees: 3 + request.turn }, `call_${request.turn}`);
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

describe('TaskTranscript', () => {
  const entry = (n: number) => ({ kind: 'goal', at: n, text: `e${n}` }) as TranscriptEntry;

  /** A store of entries with a committed length, whose reads resolve when the test says. */
  function fakeStore(initial: number) {
    const stored = Array.from({ length: initial }, (_, i) => entry(i));
    const state = { length: initial, reads: 0 };
    const pending: (() => void)[] = [];
    const read = (length: number) => {
      state.reads += 1;
      const snapshot = stored.slice(0, length);
      return new Promise<TranscriptEntry[]>((resolve) => pending.push(() => resolve(snapshot)));
    };
    const commit = (entries: TranscriptEntry[]) => {
      stored.push(...entries);
      state.length += entries.length;
    };
    return { state, read, commit, answer: () => pending.shift()!() };
  }

  it('keeps what saves made durable while the first read was in flight, after what it read', async () => {
    const store = fakeStore(2);
    const transcript = new TaskTranscript(() => store.state.length, store.read);
    transcript.emitted(entry(2));
    const inFlight = transcript.take();
    const first = transcript.all();
    // The save in flight when the read started lands, then two more, all before the read answers.
    store.commit(inFlight.entries);
    inFlight.settle(true);
    for (const n of [3, 4]) {
      transcript.emitted(entry(n));
      const save = transcript.take();
      store.commit(save.entries);
      save.settle(true);
    }
    transcript.emitted(entry(5));
    store.answer();
    expect((await first).map((e) => e.at)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(store.state.reads).toBe(1);
    expect((await transcript.all()).map((e) => e.at)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(store.state.reads).toBe(1);
  });

  it('reads once for turns that ask at the same time, and again after a read that failed', async () => {
    const store = fakeStore(1);
    let failing = true;
    const transcript = new TaskTranscript(
      () => store.state.length,
      (length) => (failing ? Promise.reject(new Error('store down')) : store.read(length)),
    );
    await expect(transcript.all()).rejects.toThrow('store down');
    failing = false;
    const both = Promise.all([transcript.all(), transcript.all()]);
    store.answer();
    expect((await both).map((view) => view.length)).toEqual([1, 1]);
    expect(store.state.reads).toBe(1);
  });

  it('shows the entries of a save in flight between the committed and the pending ones, and drops a failed save', async () => {
    const store = fakeStore(1);
    const transcript = new TaskTranscript(() => store.state.length, store.read);
    const reading = transcript.all();
    store.answer();
    await reading;
    transcript.emitted(entry(1));
    const inFlight = transcript.take();
    transcript.emitted(entry(2));
    expect((await transcript.all()).map((e) => e.at)).toEqual([0, 1, 2]);
    inFlight.settle(false);
    expect((await transcript.all()).map((e) => e.at)).toEqual([0, 2]);
    const next = transcript.take();
    store.commit(next.entries);
    next.settle(true);
    expect((await transcript.all()).map((e) => e.at)).toEqual([0, 2]);
    expect(store.state.reads).toBe(1);
  });
});
