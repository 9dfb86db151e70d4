/**
 * Records the transitions a task's actor takes into its audit entries (`moves`, read by `src/audit/chartMoves.ts`),
 * so that time travel, the live page and the step CLI read the state from what the chart did instead of inferring
 * it. It listens to XState's inspection events: a step's journal entries are emitted as `xstate.emit` actions inside
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
 * Cost per microstep: a map lookup and a two-character append; nothing is serialized.
 */
import type { AnyStateMachine, InspectionEvent } from 'xstate';
import type { AuditEntry } from '../../machines/journal.js';
import { type ChartMoves, chartMoves } from '../audit/chartMoves.js';

export class MoveRecorder {
  private readonly chart: ChartMoves;
  /** Entries the current microstep made (in order). */
  private made: AuditEntry[] = [];
  /** Transitions taken since the last entry made (or the last save) that made no entry. */
  private carry = '';
  /** The last entry the running macrostep made: the transitions after it in that macrostep are its. */
  private lastMade: AuditEntry | null = null;

  constructor(machine: AnyStateMachine) {
    this.chart = chartMoves(machine);
  }

  /** The inspection observer (root actor only: its invoked actors report here too, and are skipped). */
  readonly inspect = (event: InspectionEvent): void => {
    const type = event.type;
    if (type === '@xstate.action') {
      const action = event.action as { type: string; params?: { event?: { type?: string; entry?: AuditEntry } } };
      if (action.type === 'xstate.emit' && action.params?.event?.type === 'audit' && action.params.event.entry)
        this.made.push(action.params.event.entry);
    } else if (type === '@xstate.microstep' && event.actorRef.sessionId === event.rootId) {
      const transitions = (event as unknown as { _transitions: readonly unknown[] })._transitions;
      const tokenOf = this.chart.tokenOf;
      let tokens = '';
      for (let i = 0; i < transitions.length; i++) tokens += tokenOf.get(transitions[i]) ?? '';
      this.moved(tokens);
    }
  };

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
