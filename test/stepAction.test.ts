/**
 * stepAction (machines/stepAction.ts) relies on XState internals: a built-in action is an object with `resolve`,
 * called with (scope, snapshot, args) and returning [snapshot, params, actions], and its copy of the snapshot must equal
 * the one `assign` makes. These tests run a step both ways, as stepAction and as the `enqueueActions` it replaced, and ask for the same
 * snapshots, emitted events, inspection events and errors: an XState upgrade that changes those internals fails here
 * by name, not somewhere in a task's run.
 */
import {
  type AnyActorRef,
  type InspectionEvent,
  assign,
  createActor,
  emit,
  enqueueActions,
  raise,
  setup,
  stateIn,
} from 'xstate';
import { describe, expect, it } from 'vitest';
import { type StepOutcome, stepAction } from '../machines/stepAction.js';

type Ctx = { count: number; seen: number[] };
type Ev = { type: 'go'; by: number } | { type: 'boom' } | { type: 'next' } | { type: 'relay' };

function machineWith(kind: 'step' | 'enqueue') {
  const run = (context: Ctx, event: Ev): StepOutcome => {
    if (event.type === 'boom') throw new Error('step failed');
    const by = event.type === 'go' ? event.by : 0;
    return {
      patch: { count: context.count + by } as never,
      emitted: [{ type: 'audit', entry: { n: context.count } } as never, { type: 'reply', reply: by } as never],
      // As relayModelOutput: the model's event raised after the step's own.
      ...(event.type === 'relay' ? { raised: { type: 'next' } } : {}),
    };
  };
  const step = (
    kind === 'step'
      ? stepAction(run as never)
      : enqueueActions(({ context, event, enqueue }) => {
          const { patch, emitted, raised } = run(context as Ctx, event as Ev);
          if (patch) enqueue.assign(patch as never);
          for (const e of emitted) enqueue.emit(e as never);
          if (raised) enqueue.raise(raised as never);
        })
  ) as never;
  return setup({
    types: { context: {} as Ctx, events: {} as Ev, emitted: {} as { type: string } },
    actions: {
      step,
      // Runs after the step in the same transition: it must see the step's patch.
      note: assign({ seen: ({ context }) => [...context.seen, context.count] }),
      after: emit(({ context }) => ({ type: 'after', count: context.count })),
    },
  }).createMachine({
    context: { count: 1, seen: [] },
    initial: 'idle',
    states: {
      idle: {
        on: {
          go: { target: 'done', actions: ['step', 'note', raise({ type: 'next' }), 'after'] },
          boom: { actions: ['step'] },
          relay: { target: 'done', actions: ['step', 'after'] },
        },
      },
      done: { tags: ['finished'], on: { next: { actions: ['step', 'note'] } } },
    },
  });
}

function runBoth(events: Ev[]) {
  const out = (['step', 'enqueue'] as const).map((kind) => {
    const inspected: string[] = [];
    const emitted: unknown[] = [];
    const errors: unknown[] = [];
    const actor = createActor(machineWith(kind), {
      inspect: (e: InspectionEvent) => {
        if (e.type === '@xstate.action') inspected.push(`action ${e.action.type}`);
        else if (e.type === '@xstate.event') inspected.push(`event ${e.event.type}`);
        else if (e.type === '@xstate.microstep')
          inspected.push(`microstep ${JSON.stringify((e.snapshot as { value?: unknown }).value)}`);
        else inspected.push(e.type);
      },
    });
    actor.on('*', (e) => emitted.push(e));
    actor.subscribe({ error: (error) => errors.push(error) });
    actor.start();
    for (const event of events) (actor as AnyActorRef).send(event);
    const snapshot = actor.getSnapshot();
    return {
      inspected,
      emitted,
      errors,
      status: snapshot.status,
      value: snapshot.value,
      context: snapshot.context,
      tags: [...snapshot.tags],
      keys: Object.keys(snapshot),
      persisted: JSON.stringify(actor.getPersistedSnapshot()),
    };
  });
  return { step: out[0]!, enqueue: out[1]! };
}

describe('stepAction', () => {
  it('patches, emits and orders as enqueueActions did, with the same inspection events', () => {
    const { step, enqueue } = runBoth([{ type: 'go', by: 2 }]);
    expect(step).toEqual(enqueue);
    expect(step.context).toEqual({ count: 3, seen: [3, 3] });
    expect(step.emitted).toEqual([
      { type: 'audit', entry: { n: 1 } },
      { type: 'reply', reply: 2 },
      { type: 'after', count: 3 },
      { type: 'audit', entry: { n: 3 } },
      { type: 'reply', reply: 0 },
    ]);
    expect(step.inspected.filter((e) => e.startsWith('action'))).toEqual([
      'action xstate.emit',
      'action xstate.emit',
      'action xstate.raise',
      'action xstate.emit',
      'action xstate.emit',
      'action xstate.emit',
    ]);
  });

  it('raises its event after its emitted ones, as enqueue.raise did', () => {
    const { step, enqueue } = runBoth([{ type: 'relay' }]);
    expect(step).toEqual(enqueue);
    expect(step.tags).toEqual(['finished']);
    expect(step.inspected.filter((e) => e.startsWith('action'))).toEqual([
      'action xstate.emit',
      'action xstate.emit',
      'action xstate.raise',
      'action xstate.emit',
      'action xstate.emit',
      'action xstate.emit',
    ]);
    expect(step.emitted.map((e) => (e as { type: string }).type)).toEqual([
      'audit',
      'reply',
      'after',
      'audit',
      'reply',
    ]);
  });

  it('puts the actor in its error snapshot when a step throws, as enqueueActions did', () => {
    const { step, enqueue } = runBoth([{ type: 'boom' }]);
    expect(step).toEqual(enqueue);
    expect(step.status).toBe('error');
    expect(step.errors).toEqual([new Error('step failed')]);
  });
  it('keeps the state value and tags right when patches run in exit, transition and entry actions, and after a restore', () => {
    // stepAction copies the snapshot without recomputing value and tags (assign's clone did): XState recomputes them
    // at the end of a microstep that changes the active states, and a patch alone never changes them.
    const machine = (withStep: boolean) => {
      const bump = withStep
        ? stepAction((c) => ({ patch: { count: (c as unknown as Ctx).count + 1 } as never, emitted: [] }))
        : assign({ count: ({ context }: { context: Ctx }) => context.count + 1 });
      const b = bump as never;
      return setup({ types: {} as { context: Ctx; events: { type: 'go' } | { type: 'stay' } } }).createMachine({
        context: { count: 0, seen: [] },
        initial: 'a',
        states: {
          a: { tags: ['ta'], entry: b, exit: b, on: { go: { target: 'b', actions: b }, stay: { actions: b } } },
          b: { tags: ['tb'], entry: b, always: { guard: stateIn('b') as never, target: 'c', actions: b } },
          c: {
            tags: ['tc'],
            type: 'parallel',
            states: { x: { tags: ['tx'], entry: b }, y: { entry: b } },
            on: { stay: { actions: b } },
          },
        },
      });
    };
    const seen = [true, false].map((withStep) => {
      const shots: string[] = [];
      const shot = (s: { value: unknown; tags: Set<string>; context: Ctx }) =>
        shots.push(JSON.stringify([s.value, [...s.tags], s.context.count]));
      const actor = createActor(machine(withStep));
      actor.subscribe(shot);
      actor.start();
      for (const type of ['stay', 'go', 'stay'] as const) actor.send({ type });
      const again = createActor(machine(withStep), { snapshot: actor.getPersistedSnapshot() }).start();
      again.send({ type: 'stay' });
      shot(again.getSnapshot());
      return shots;
    });
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]!.at(-1)).toBe(JSON.stringify([{ c: { x: {}, y: {} } }, ['tc', 'tx'], 10]));
  });

  it("emits each actor's own events when an inspector runs another actor's step between two emits", () => {
    const out = (['step', 'enqueue'] as const).map((kind) => {
      const other = createActor(machineWith(kind)).start();
      const otherEmitted: unknown[] = [];
      other.on('*', (e) => otherEmitted.push(e));
      let nudged = false;
      const emitted: unknown[] = [];
      const actor = createActor(machineWith(kind), {
        // A host's inspector that acts at once on what it sees: XState executes an action (and reports it) between
        // the resolution of one emit and the next, so the other actor's whole step runs right there.
        inspect: (e: InspectionEvent) => {
          if (e.type !== '@xstate.action' || e.action.type !== 'xstate.emit' || nudged || e.actorRef === other) return;
          nudged = true;
          other.send({ type: 'go', by: 100 });
        },
      });
      actor.on('*', (e) => emitted.push(e));
      actor.start();
      actor.send({ type: 'go', by: 2 });
      return { emitted, otherEmitted };
    });
    expect(out[0]!.emitted.slice(0, 3)).toEqual([
      { type: 'audit', entry: { n: 1 } },
      { type: 'reply', reply: 2 },
      { type: 'after', count: 3 },
    ]);
    expect(out[0]!.otherEmitted[1]).toEqual({ type: 'reply', reply: 100 });
    expect(out[0]).toEqual(out[1]);
  });
});
