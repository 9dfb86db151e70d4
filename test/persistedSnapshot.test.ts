/** A save's persisted snapshot is XState's, without XState's walk of the whole context on every save. */
import { describe, expect, it } from 'vitest';
import { assign, createActor, createMachine, fromPromise, setup } from 'xstate';
import { persistedSnapshotOf } from '../src/runtime/taskSaves.js';

const json = (value: unknown) => JSON.stringify(value);

describe('persistedSnapshotOf', () => {
  it('gives what getPersistedSnapshot gives, invoked actors included, and the live context itself', () => {
    const machine = setup({
      types: { context: {} as { n: number; deep: { list: string[]; more: { x: number } } } },
      actors: { wait: fromPromise(() => new Promise<number>(() => {})) },
    }).createMachine({
      context: { n: 0, deep: { list: ['a'], more: { x: 1 } } },
      initial: 'idle',
      states: {
        idle: { on: { go: { target: 'busy', actions: assign({ n: ({ context }) => context.n + 1 }) } } },
        busy: { invoke: { src: 'wait', input: { at: 1 } }, on: { back: 'idle' } },
      },
    });
    const actor = createActor(machine).start();
    for (const event of ['go', 'back', 'go']) {
      actor.send({ type: event });
      const ours = persistedSnapshotOf(machine, actor.getSnapshot());
      expect(json(ours)).toBe(json(actor.getPersistedSnapshot()));
      expect(ours.context).toBe(actor.getSnapshot().context);
    }
    actor.stop();
  });

  it('leaves a context that holds an actor reference to XState, which persists the reference by its id', () => {
    const child = createMachine({ initial: 'a', states: { a: {} } });
    const machine = setup({ types: { context: {} as { refs: { child: unknown } } }, actors: { child } }).createMachine({
      context: ({ spawn }) => ({ refs: { child: spawn('child', { id: 'kid' }) } }),
    });
    const actor = createActor(machine).start();
    const ours = persistedSnapshotOf(machine, actor.getSnapshot());
    expect(json(ours)).toBe(json(actor.getPersistedSnapshot()));
    expect(json(ours.context)).toContain('"id":"kid"');
    // Asked again (the parts without references are known by now), the answer is the same.
    expect(json(persistedSnapshotOf(machine, actor.getSnapshot()))).toBe(json(actor.getPersistedSnapshot()));
    actor.stop();
  });
});
