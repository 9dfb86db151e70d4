/** A save's persisted snapshot is XState's, without XState's walk of the whole context on every save. */
import { describe, expect, it } from 'vitest';
import { assign, createActor, createMachine, fromPromise, setup } from 'xstate';
import { PersistedSnapshots } from '../src/runtime/taskSaves.js';

const json = (value: unknown) => JSON.stringify(value);

describe('PersistedSnapshots', () => {
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
    const snapshots = new PersistedSnapshots(machine);
    for (const event of ['go', 'back', 'go']) {
      actor.send({ type: event });
      const ours = snapshots.of(actor.getSnapshot());
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
    const snapshots = new PersistedSnapshots(machine);
    const ours = snapshots.of(actor.getSnapshot());
    expect(json(ours)).toBe(json(actor.getPersistedSnapshot()));
    expect(json(ours.context)).toContain('"id":"kid"');
    // Asked again, the answer is the same.
    expect(json(snapshots.of(actor.getSnapshot()))).toBe(json(actor.getPersistedSnapshot()));
    actor.stop();
  });

  it('sees a reference a later step puts into the context, after saves of contexts without one', () => {
    const child = createMachine({ initial: 'a', states: { a: {} } });
    const machine = setup({
      types: { context: {} as { n: number; refs: { child: unknown } | null } },
      actors: { child },
    }).createMachine({
      context: { n: 0, refs: null },
      on: {
        count: { actions: assign({ n: ({ context }) => context.n + 1 }) },
        spawn: { actions: assign({ refs: ({ spawn }) => ({ child: spawn('child', { id: 'later' }) }) }) },
      },
    });
    const actor = createActor(machine).start();
    const snapshots = new PersistedSnapshots(machine);
    for (const event of ['count', 'count', 'spawn', 'count']) {
      actor.send({ type: event });
      expect(json(snapshots.of(actor.getSnapshot()))).toBe(json(actor.getPersistedSnapshot()));
    }
    expect(json(snapshots.of(actor.getSnapshot()).context)).toContain('"id":"later"');
    actor.stop();
  });
});
