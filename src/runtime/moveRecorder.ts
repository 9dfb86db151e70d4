/**
 * Records the transitions a task's actor takes into its audit entries (`moves`, read by `src/audit/chartMoves.ts`),
 * so that time travel, the live page and the step CLI read the state from what the chart did instead of inferring
 * it. It reads XState's inspection events: a step's journal entries are emitted as `xstate.emit` actions inside
 * the microstep that makes them (reported as `@xstate.action` before that microstep's `@xstate.microstep`).
 *
 * Which entry a transition goes to: the last entry a microstep makes gets that microstep's transition; the
 * transitions after it in the same macrostep that make no entry go to the macrostep's last entry; those of a
 * macrostep that makes none go to the next entry made, or, when a save comes first, to the last entry that save
 * takes. So the state after an entry is the state the actor came to rest in after the macrostep that made it (for
 * an earlier entry of that macrostep: the state its microstep entered), and the state after a save's last entry is
 * the state saved. The initial macrostep is matched the same way, though XState runs its actions after its
 * microsteps: its transitions go to the last entry it made.
 *
 * How the events are read, and what it costs: an inspection observer (`createActor`'s `inspect`) makes XState copy
 * every event it reports (`{ ...event, rootId }`, for every action, microstep, snapshot and event of the actor and
 * its invoked actors), which cost ~5% of a busy process's CPU. So the observer only serves while the actor is being
 * made (the initial macrostep runs then); `attach` then takes the system's own reporting function, which hands the
 * events XState builds anyway straight to the recorder, uncopied, and on to the inspection observers only when
 * there are any besides the recorder's (an `inspect` option, or one added with `actor.system.inspect` later). If an
 * XState release lacks that function, `attach` leaves the observer in place: the moves are the same, at the old cost.
 *
 * Cost per microstep: a map lookup and a two-character append; nothing is serialized.
 */
import type { AnyActorRef, AnyStateMachine, InspectionEvent, Observer } from 'xstate';
import type { AuditEntry } from '../../machines/journal.js';
import { type ChartTokens, chartTokens } from '../audit/chartMoves.js';

type Inspect = (event: InspectionEvent) => void;

/** The part of an XState system `attach` takes over (internal to XState, checked before use). */
interface InspectableSystem {
  _sendInspectionEvent: (event: unknown) => void;
  inspect: (observer: Observer<InspectionEvent> | Inspect) => unknown;
}

export class MoveRecorder {
  private readonly chart: ChartTokens;
  /** Entries the current microstep made (in order). */
  private made: AuditEntry[] = [];
  /** Transitions taken since the last entry made (or the last save) that made no entry. */
  private carry = '';
  /** The last entry the running macrostep made: the transitions after it in that macrostep are its. */
  private lastMade: AuditEntry | null = null;
  /** Whether `attach` took over: the observer no longer records. */
  private attached = false;

  constructor(machine: AnyStateMachine) {
    this.chart = chartTokens(machine);
  }

  /** Reads `machine`'s transition tokens now (once per machine, ~0.3 ms), so that no task's start pays for it. */
  static prepare(machine: AnyStateMachine): void {
    chartTokens(machine);
  }

  /**
   * The `inspect` option to create the actor with: it records until `attach` takes over, and hands every event to
   * `user` (the host's own inspection, if any). What `user` throws goes to `onThrow`, not into XState: XState calls
   * observers unguarded, in the middle of a transition, and a throw there leaves the task's actor broken.
   */
  observer(user?: Inspect, onThrow?: (error: unknown) => void): Inspect {
    if (!user)
      return (event) => {
        if (!this.attached) this.inspect(event);
      };
    const host = guarded(user, onThrow);
    return (event) => {
      if (!this.attached) this.inspect(event);
      host(event);
    };
  }

  /**
   * Reads `actor`'s events straight from its system from now on (see the top of this file); `inspected`: whether
   * the actor was created with an observer of the host's, which then still receives every event. Returns whether it
   * took over (false: this XState has no such function, and the observer keeps recording). Observers added to the
   * system later are guarded as `observer`'s is: what they throw goes to `onThrow`.
   */
  attach(actor: AnyActorRef, inspected: boolean, onThrow?: (error: unknown) => void): boolean {
    const system = actor.system as unknown as Partial<InspectableSystem>;
    const report = system._sendInspectionEvent;
    const subscribe = system.inspect;
    if (typeof report !== 'function' || typeof subscribe !== 'function') return false;
    const rootId = actor.sessionId;
    let observed = inspected;
    system.inspect = (observer) => {
      observed = true;
      const next = typeof observer === 'function' ? observer : observer.next?.bind(observer);
      return subscribe(next ? guarded(next, onThrow) : observer);
    };
    system._sendInspectionEvent = (event) => {
      this.record(event as InspectionEvent, rootId);
      if (observed) report(event);
    };
    this.attached = true;
    return true;
  }

  /** An inspection observer that records (root actor only: its invoked actors report here too, and are skipped). */
  readonly inspect = (event: InspectionEvent): void => this.record(event, event.rootId);

  private record(event: InspectionEvent, rootId: string): void {
    const type = event.type;
    if (type === '@xstate.action') {
      const action = event.action as { type: string; params?: { event?: { type?: string; entry?: AuditEntry } } };
      if (action.type === 'xstate.emit' && action.params?.event?.type === 'audit' && action.params.event.entry)
        this.made.push(action.params.event.entry);
    } else if (type === '@xstate.microstep' && event.actorRef.sessionId === rootId) {
      const transitions = (event as unknown as { _transitions: readonly unknown[] })._transitions;
      const tokenOf = this.chart.tokenOf;
      let tokens = '';
      for (let i = 0; i < transitions.length; i++) tokens += tokenOf.get(transitions[i]) ?? '';
      this.moved(tokens);
    }
  }

  private moved(tokens: string): void {
    const made = this.made;
    if (made.length === 0) {
      this.carry += tokens;
      return;
    }
    this.made = [];
    for (const entry of made) entry.moves = '';
    made[0]!.moves = this.carry;
    this.lastMade = made[made.length - 1]!;
    this.lastMade.moves += tokens;
    this.carry = '';
  }

  /**
   * An entry was emitted: its macrostep is over (XState emits after the macrostep). The transitions the macrostep
   * took after its last entry go to that entry. Entries still unmatched were made by the initial macrostep, whose
   * actions XState runs after its microsteps: its transitions go to the last of them.
   */
  emitted(): void {
    const made = this.made;
    if (made.length > 0) {
      this.made = [];
      for (const entry of made) entry.moves = '';
      this.lastMade = made[made.length - 1]!;
    }
    if (this.lastMade) {
      this.lastMade.moves += this.carry;
      this.carry = '';
      this.lastMade = null;
    }
  }

  /**
   * A save takes `audit` (every entry emitted since the last one): the transitions since its last entry go to that
   * entry (the state saved), and its first entry names the chart.
   */
  taken(audit: readonly AuditEntry[]): void {
    const last = audit[audit.length - 1];
    if (!last) return;
    last.moves = (last.moves ?? '') + this.carry;
    this.carry = '';
    audit[0]!.moves = `${this.chart.fingerprint}/${audit[0]!.moves ?? ''}`;
  }
}

/** `observer`, made never to throw: what it throws goes to `onThrow` (itself guarded), and XState goes on. */
function guarded(observer: Inspect, onThrow?: (error: unknown) => void): Inspect {
  return (event) => {
    try {
      observer(event);
    } catch (error) {
      try {
        onThrow?.(error);
      } catch {
        // A reporter that throws too has nowhere left to report to.
      }
    }
  };
}
