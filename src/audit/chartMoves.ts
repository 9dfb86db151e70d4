/**
 * The transitions a task took, as the runtime records them in its audit entries (`moves`), and their reading. The
 * chart is known once: a transition is recorded as its number among the chart's own transitions (in definition
 * order, as `describeChart` numbers them), and everything about it (the state it leaves, its event, its guard, the
 * state it enters) is read back from the chart's definition, never from a copy of it.
 *
 * Format of `moves`: an optional `<chart>/` prefix, then one token of two base-36 digits per transition taken, in
 * order (`"k3vd/0a0b"`: chart `k3vd`, transitions 10 and 11). `<chart>` is a fingerprint of the chart's transition
 * list (sources, events, targets, whether guarded; not the guards' names, which a rename may change without changing
 * a transition); the runtime writes it on the first entry of every save, so a journal written by another chart (a
 * deploy in between) is never read with this one's numbering. An entry without `moves` was written before
 * transitions were recorded.
 */
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { describeGuard } from '../visualize/describeChart.js';

/** One transition of the chart, as a recorded move reads it. */
export interface ChartMove {
  /** Its number (0-based) in the chart's definition order: `describeChart(machine).edges[index]`. */
  index: number;
  /** The state whose transition it is (dotted), `*` for one of the root's (taken from any state). */
  source: string;
  /** The event, `always` for an eventless transition. */
  event: string;
  /** The guard as text (`a and not b`), null when it has none. */
  guard: string | null;
  /** The atomic state it enters (its target's initial descendants followed), null when targetless. */
  target: string | null;
  reenter: boolean;
}

/** What the runtime needs to record a transition: the chart's identity and every transition's token. */
export interface ChartTokens {
  fingerprint: string;
  /** The transition definitions (the objects XState's `@xstate.microstep` events carry) by their number. */
  indexOf: ReadonlyMap<unknown, number>;
  /** The same definitions with their tokens in `moves` (made once, so recording a transition allocates nothing). */
  tokenOf: ReadonlyMap<unknown, string>;
}

export interface ChartMoves extends ChartTokens {
  moves: readonly ChartMove[];
  /** The chart's initial atomic state. */
  initial: string;
}

const TOKEN_WIDTH = 2;
const MAX_MOVES = 36 ** TOKEN_WIDTH;

const tokensCache = new WeakMap<AnyStateMachine, ChartTokens>();
const movesCache = new WeakMap<AnyStateMachine, ChartMoves>();

/**
 * The tokens of `machine`'s transitions and its fingerprint (read once per machine): what recording needs, without
 * the guards' texts (the costly part of reading a chart, which only readers need).
 */
export function chartTokens(machine: AnyStateMachine): ChartTokens {
  let known = tokensCache.get(machine);
  if (!known) {
    known = readTokens(machine);
    tokensCache.set(machine, known);
  }
  return known;
}

/** The transitions of `machine` (read once per machine). */
export function chartMoves(machine: AnyStateMachine): ChartMoves {
  let known = movesCache.get(machine);
  if (!known) {
    known = readChart(machine);
    movesCache.set(machine, known);
  }
  return known;
}

const pathOf = (node: AnyStateNode) => node.path.join('.');

/** The atomic state entering `node` ends in: its initial children followed down. */
function atomicOf(node: AnyStateNode): string {
  let at = node;
  while (at.type === 'compound' && at.initial?.target?.[0]) at = at.initial.target[0];
  return pathOf(at);
}

interface RawTransition {
  target?: AnyStateNode[];
  guard?: Parameters<typeof describeGuard>[0];
  reenter?: boolean;
}

/** Every transition of `machine` with the state it belongs to (`*`: the root) and its event, in definition order. */
function eachTransition(machine: AnyStateMachine, visit: (source: string, event: string, raw: RawTransition) => void) {
  // The order of describeChart: a node's eventless transitions, then its events', then its children, depth first.
  const walk = (node: AnyStateNode) => {
    const source = node === machine.root ? '*' : pathOf(node);
    if (node.always) for (const raw of node.always) visit(source, 'always', raw as RawTransition);
    for (const [event, transitions] of node.transitions)
      for (const raw of transitions) visit(source, event, raw as RawTransition);
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(machine.root);
}

function readTokens(machine: AnyStateMachine): ChartTokens {
  const indexOf = new Map<unknown, number>();
  const tokenOf = new Map<unknown, string>();
  // The guards' names are left out: renaming or naming a guard changes no transition's meaning (its text is read from
  // the chart in hand); whether a transition is guarded, and everything else about it, is in.
  const lines: string[] = [];
  eachTransition(machine, (source, event, raw) => {
    const target = raw.target?.[0];
    // Guarded: any guard at all (its text is never empty; reading it is what costs).
    const guarded = raw.guard !== undefined;
    indexOf.set(raw, lines.length);
    tokenOf.set(raw, moveToken(lines.length));
    lines.push(
      `${source}|${event}|${guarded ? 'guarded' : ''}|${target ? atomicOf(target) : ''}|${raw.reenter === true}`,
    );
  });
  if (lines.length > MAX_MOVES) throw new Error(`the chart has ${lines.length} transitions; moves encode ${MAX_MOVES}`);
  return { fingerprint: fnv1a(lines.join('\n')), indexOf, tokenOf };
}

function readChart(machine: AnyStateMachine): ChartMoves {
  const moves: ChartMove[] = [];
  eachTransition(machine, (source, event, raw) => {
    const target = raw.target?.[0];
    moves.push({
      index: moves.length,
      source,
      event,
      guard: describeGuard(raw.guard).text || null,
      target: target ? atomicOf(target) : null,
      reenter: raw.reenter === true,
    });
  });
  return { ...chartTokens(machine), moves, initial: atomicOf(machine.root) };
}

/** FNV-1a (32 bits) in base 36: an identity of the transition list, not a secret. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(36);
}

/** The token of transition `index`. */
export function moveToken(index: number): string {
  return index.toString(36).padStart(TOKEN_WIDTH, '0');
}

/** A `moves` field read: the chart it declares (if it does), and the transition numbers; null when malformed. */
export function readMoves(text: string): { chart: string | null; indexes: number[] } | null {
  const slash = text.indexOf('/');
  const chart = slash >= 0 ? text.slice(0, slash) : null;
  const body = slash >= 0 ? text.slice(slash + 1) : text;
  if (body.length % TOKEN_WIDTH !== 0 || !/^[0-9a-z]*$/.test(body) || chart === '') return null;
  const indexes: number[] = [];
  for (let i = 0; i < body.length; i += TOKEN_WIDTH) indexes.push(parseInt(body.slice(i, i + TOKEN_WIDTH), 36));
  return { chart, indexes };
}
