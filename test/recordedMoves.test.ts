/**
 * The transitions the runtime records (src/runtime/moveRecorder.ts) against the live actor: replaying a journal
 * (`replayAudit`) gives, after the last entry of each macrostep, the state the actor came to rest in, for every demo
 * scenario and along random walks of the path-exploration world (restarts included). The live state is read from
 * XState's own snapshots (`@xstate.snapshot` inspection events, or the actor's snapshot), not from the recorder.
 */
import { createActor, fromPromise, type InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../machines/journal.js';
import { agentMachine } from '../machines/agentMachine.js';
import { chartMoves, readMoves } from '../src/audit/chartMoves.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { MoveRecorder } from '../src/runtime/moveRecorder.js';
import { stateValueToString } from '../src/store/summary.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { describeChart } from '../src/visualize/describeChart.js';
import { SCENARIO_NAMES, scenarios } from '../examples/booking/scenarios.js';
import { movesFor } from './support/agentMoves.js';
import { CHART, type Move, applyMove, initialWorld, valueOf, withLimits } from './support/agentWorld.js';
import { inertScope } from './support/explore.js';

/** The long scenario's read rounds in these sweeps, which cost the square of a task's length (default 300). */
const SHORT_LONG = 40;

/** What one live actor did, read off its inspection events: the entries it made, and where each macrostep rested. */
interface ActorLog {
  taskId: string;
  made: AuditEntry[];
  /** After each macrostep: how many entries the actor had made, whether this macrostep made any, its state. */
  rests: { made: number; madeAny: boolean; state: string }[];
}

function watchActors() {
  const actors = new Map<string, ActorLog>();
  const inspect = (event: InspectionEvent) => {
    if (event.actorRef.sessionId !== event.rootId) return;
    let log = actors.get(event.rootId);
    if (event.type === '@xstate.action') {
      const action = event.action as { type: string; params?: { event?: { type?: string; entry?: AuditEntry } } };
      if (action.type === 'xstate.emit' && action.params?.event?.type === 'audit') {
        if (!log) actors.set(event.rootId, (log = { taskId: '', made: [], rests: [] }));
        log.made.push(action.params.event.entry!);
      }
    } else if (event.type === '@xstate.snapshot') {
      const snapshot = event.snapshot as unknown as { value: unknown; context?: { taskId?: string } };
      if (!snapshot.context?.taskId) return;
      if (!log) actors.set(event.rootId, (log = { taskId: '', made: [], rests: [] }));
      log.taskId = snapshot.context.taskId;
      const before = log.rests.at(-1)?.made ?? 0;
      log.rests.push({
        made: log.made.length,
        madeAny: log.made.length > before,
        state: stateValueToString(snapshot.value),
      });
    }
  };
  return { actors, inspect };
}

/** An entry as compared across the store: without the transitions the recorder added. */
const bare = (entry: AuditEntry) => JSON.stringify({ ...entry, moves: undefined });

/** Where `made` (one actor's entries, in order) sits in the task's journal. */
function offsetIn(journal: readonly AuditEntry[], made: readonly AuditEntry[]): number {
  const want = made.map(bare);
  for (let at = 0; at + want.length <= journal.length; at++)
    if (want.every((text, i) => bare(journal[at + i]!) === text)) return at;
  throw new Error('the actor’s entries are not in the journal');
}

describe('recorded transitions', () => {
  it('are read with the chart of this build: the same numbering as the diagrams, one fingerprint for the shape', () => {
    const known = chartMoves(agentMachine);
    const edges = describeChart(agentMachine).edges;
    expect(known.moves.map((m) => [m.source, m.event, m.guard])).toEqual(
      edges.map((e) => [e.source, e.event, e.guard]),
    );
    // The chart's shape does not depend on the tools: the exploration world's chart reads the same.
    expect(chartMoves(CHART).fingerprint).toBe(known.fingerprint);
    expect(readMoves('abc/0a1z')).toEqual({ chart: 'abc', indexes: [10, 71] });
    expect(readMoves('0a1')).toBeNull();
  });

  describe.each(SCENARIO_NAMES)('on the %s scenario', (name) => {
    it('replays, after the last entry of every macrostep, the state the live actor rested in', async () => {
      const { actors, inspect } = watchActors();
      const store = new MemoryStore();
      await scenarios[name]({ store, inspect, longRounds: SHORT_LONG });
      let checked = 0;
      for (const log of actors.values()) {
        if (log.made.length === 0) continue;
        const journal = (await store.readJournal(log.taskId, 'audit', 0, Number.MAX_SAFE_INTEGER)) as AuditEntry[];
        expect(journal.every((e) => typeof e.moves === 'string')).toBe(true);
        const offset = offsetIn(journal, log.made);
        for (const rest of log.rests) {
          if (!rest.madeAny) continue;
          const replayed = replayAudit(journal, offset + rest.made);
          expect(replayed.state, `${log.taskId} after ${offset + rest.made} entries`).toBe(rest.state);
          expect(replayed.recorded).toBe(true);
          checked += 1;
        }
      }
      expect(checked).toBeGreaterThan(3);
    });

    it('records the same moves with and without a host inspection observer', async () => {
      const watched = await scenarios[name]({ store: new MemoryStore(), inspect: () => {}, longRounds: SHORT_LONG });
      const unwatched = await scenarios[name]({ store: new MemoryStore(), longRounds: SHORT_LONG });
      expect(unwatched.audit.map((e) => e.moves)).toEqual(watched.audit.map((e) => e.moves));
      expect(unwatched.audit.every((e) => typeof e.moves === 'string')).toBe(true);
    });
  });

  describe('read from the system without inspection observers (`attach`)', () => {
    const live = CHART.provide({ actors: { model: fromPromise<never>(() => new Promise<never>(() => {})) } as never });
    const input = withLimits({ modelTurns: 3 });

    it('leaves XState’s inspection path alone until an observer is added, then serves it', () => {
      const recorder = new MoveRecorder(live);
      const actor = createActor(live, { input, inspect: recorder.observer() });
      // Count what reaches XState's own reporting (which copies each event for its observers).
      const system = actor.system as unknown as { _sendInspectionEvent: (event: unknown) => void };
      const report = system._sendInspectionEvent;
      let reported = 0;
      system._sendInspectionEvent = (event) => {
        reported += 1;
        report(event);
      };
      expect(recorder.attach(actor, false)).toBe(true);
      const entries: AuditEntry[] = [];
      actor.on('audit', ({ entry }) => {
        recorder.emitted();
        entries.push(entry);
      });
      actor.start();
      expect(reported).toBe(0);
      expect(entries.length).toBeGreaterThan(0);
      expect(entries.some((e) => (e.moves ?? '').length > 0)).toBe(true);
      const seen: InspectionEvent[] = [];
      actor.system.inspect((event) => seen.push(event));
      actor.send({ type: 'task.cancelled', at: 0, reason: 'test', by: 'user' } as never);
      expect(reported).toBeGreaterThan(0);
      expect(seen.some((e) => e.type === '@xstate.microstep' && e.rootId === actor.sessionId)).toBe(true);
      actor.stop();
    });

    it('gives the host observer every event once, and records each move once', () => {
      const recorder = new MoveRecorder(live);
      const seen: InspectionEvent[] = [];
      const actor = createActor(live, { input, inspect: recorder.observer((event) => seen.push(event)) });
      recorder.attach(actor, true);
      const entries: AuditEntry[] = [];
      actor.on('audit', ({ entry }) => {
        recorder.emitted();
        entries.push(entry);
      });
      actor.start();
      const microsteps = seen.filter((e) => e.type === '@xstate.microstep' && e.actorRef === actor);
      const tokens = entries.map((e) => e.moves ?? '').join('');
      const taken = microsteps.flatMap((e) => (e as unknown as { _transitions: unknown[] })._transitions);
      expect(tokens.length).toBe(2 * taken.length);
      expect(new Set(seen).size).toBe(seen.length);
      actor.stop();
    });
  });

  describe('along random walks of the path-exploration world', () => {
    /** Invoked actors that never answer: the walk delivers their results as the world's moves. */
    const never = () => fromPromise<never>(() => new Promise<never>(() => {}));
    const live = CHART.provide({
      actors: {
        model: never(),
        validateCall: never(),
        authorizeCall: never(),
        recheckCall: never(),
        executeReads: never(),
        executeWrite: never(),
        lookupWrite: never(),
      } as never,
    });

    /** A seeded generator (mulberry32), so that a failing walk can be walked again. */
    const seeded = (seed: number) => () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
    };

    const fingerprint = chartMoves(live).fingerprint;

    /** One walk of up to 40 moves from the world's start; what it checked. */
    const walk = (seed: number) => {
      const random = seeded(seed);
      const scope = inertScope();
      const input = withLimits({ modelTurns: 3 });
      let world = initialWorld(scope, input, CHART);
      const journal: AuditEntry[] = [];
      let pending: AuditEntry[] = [];
      let recorder = new MoveRecorder(live);
      // Odd seeds read the events as the runtime does (`attach`), even seeds through the inspection observer alone.
      const start = (snapshot?: unknown) => {
        const inspect = recorder.observer();
        const actor = snapshot
          ? createActor(live, { snapshot, inspect } as never)
          : createActor(live, { input, inspect });
        if (seed % 2 === 1) expect(recorder.attach(actor, false)).toBe(true);
        actor.on('audit', ({ entry }) => {
          recorder.emitted();
          pending.push(entry);
        });
        actor.start();
        return actor;
      };
      const save = () => {
        recorder.taken(pending);
        journal.push(...pending);
        pending = [];
      };
      let actor = start();
      const stateNow = () => stateValueToString(actor.getSnapshot().value);
      const counts = { moves: 0, checks: 0, restarts: 0, unrecordedRests: 0 };
      for (let step = 0; step < 40 && world.machine.status === 'active'; step++) {
        const all = movesFor(world).filter((m: Move) => !m.tamper);
        // Mostly moves that keep the task going, so that walks get past the first turn.
        const restarts = random() < 0.15;
        const going = all.filter(
          (m) => (restarts || !m.restart) && applyMove(world, m, scope).machine.status === 'active',
        );
        const moves = going.length > 0 && random() < 0.9 ? going : all;
        if (moves.length === 0) break;
        const move = moves[Math.floor(random() * moves.length)]!;
        const where = `seed ${seed}, step ${step}: ${move.type}`;
        if (move.restart) {
          // The runtime restarts from what it saved: save, then restore the persisted snapshot.
          save();
          const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as unknown;
          actor.stop();
          recorder = new MoveRecorder(live);
          actor = start(persisted);
          counts.restarts += 1;
        }
        const before = journal.length + pending.length;
        const stateBefore = stateNow();
        if (move.event) actor.send(move.event as never);
        world = applyMove(world, move, scope);
        counts.moves += 1;
        // The live actor and the world's pure transitions agree (the walk is the exploration's own).
        expect(stateNow(), where).toBe(valueOf(world.machine));
        if (journal.length + pending.length > before) {
          // Read as a save would store them, without taking them (the transitions after them stay unassigned).
          const unsaved = pending.map((entry, i) =>
            i === 0 ? { ...entry, moves: `${fingerprint}/${entry.moves}` } : entry,
          );
          expect(replayAudit([...journal, ...unsaved]).state, where).toBe(stateNow());
          counts.checks += 1;
        } else if (stateNow() !== stateBefore) counts.unrecordedRests += 1;
        if (random() < 0.3 && pending.length > 0) {
          save();
          expect(replayAudit(journal).state, `${where}, saved`).toBe(stateNow());
          counts.checks += 1;
        }
      }
      save();
      actor.stop();
      return counts;
    };

    it('replays the actor’s state after every move that made entries, and after every save', () => {
      const total = { moves: 0, checks: 0, restarts: 0, unrecordedRests: 0 };
      for (let seed = 1; seed <= 60; seed++) {
        const counts = walk(seed);
        for (const key of Object.keys(total) as (keyof typeof total)[]) total[key] += counts[key];
      }
      console.log(
        `[recordedMoves] 60 walks: ${total.moves} moves, ${total.checks} replays checked, ${total.restarts} restarts, ` +
          `${total.unrecordedRests} moves that changed the state without an entry`,
      );
      expect(total.checks).toBeGreaterThan(400);
      expect(total.restarts).toBeGreaterThan(5);
    });
  });
});
