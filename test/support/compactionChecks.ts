/**
 * Compaction in the adversarial world: the moves of a task started with chart compaction (a model summariser, a
 * small threshold) and the rules on them, read off the harness's record (`compactionWorld.ts`). The model reads a new
 * day each turn (the conversation grows), books, answers, or its prompt is refused as too long (`context_too_long`);
 * the summariser replaces older turns (below the threshold, or still over it), has nothing older to replace, falls
 * back to the facts note when its model fails, or fails itself; a restart or a cancel comes in while it works.
 *
 * Rules:
 * - C1 at most one compaction per model turn (the chart never compacts again before the next turn: no loop);
 * - C2 no model turn is asked over the threshold unless the chart compacted right before it;
 * - C3 compaction keeps the facts: on its answer nothing changes but the compaction record and the budget (a new turn
 *   aside); a summary that replaced nothing leaves the summary as it was; the record is the summariser's answer;
 * - C4 a refused prompt with nothing older to replace stops `context_too_long`, and only that does;
 * - C5 a prompt refused as too long compacts, unless the chart compacted right before that turn: then it stops
 *   `context_too_long` (asking again the same way would be refused the same way);
 * - C6 a summariser that fails stops the task (internal error);
 * - C7 a model summariser's turn is reserved only with room left for the turn it compacts for, and settled to what
 *   it spent.
 */
import type { MachineEvent, ModelActorOutput, SummariseActorOutput } from '../../machines/actors.js';
import type { AgentInput } from '../../machines/context.js';
import type { ModelEvent } from '../../machines/events.js';
import { FINAL_STATES, INPUT, type Move, type World, valueOf, variableContext } from './agentWorld.js';
import { entersCompaction } from './compactionWorld.js';

/**
 * Compaction past 40 estimated tokens (a read and its result are about 30), by a model summariser; 500 tokens hold
 * a summariser's turn beside the next turn's in the first compactions only (then the facts note stands in).
 */
export const COMPACTION_INPUT: AgentInput = {
  ...INPUT,
  compaction: { atTokens: 40, resultBytes: 512, summariser: 'model' },
  limits: { ...INPUT.limits, modelTurns: 4, toolCalls: 4, tokens: 500, costMicros: 10_000 },
};

const USAGE = { inputTokens: 60, outputTokens: 40, costMicros: 10 };
const SUMMARY_USAGE = { inputTokens: 30, outputTokens: 20, costMicros: 5 };

function said(event: ModelEvent): MachineEvent {
  const output: ModelActorOutput = { kind: 'replied', at: event.at, retriesUsed: 0, event };
  return { type: 'xstate.done.actor.model', output };
}

/** The model's moves in the compaction world: a read of a day not read before, a booking, an answer, too long. */
export function compactionModelMoves(world: World): Move[] {
  const at = world.shadow.now;
  const turn = world.machine.context.turn;
  const propose = (type: string, name: string, args: object): Move => ({
    type: `model: ${type}`,
    protocol: 'accepted',
    calls: [{ callId: 'c1', schemaOk: true }],
    event: said({
      type: 'model.toolsProposed',
      at,
      calls: [{ callId: 'c1', name, arguments: JSON.stringify(args) }],
      text: null,
      usage: USAGE,
    }),
  });
  const failed: ModelActorOutput = {
    kind: 'failed',
    at,
    retriesUsed: 0,
    failure: { code: 'context_too_long', message: 'the prompt is longer than the window of 600', transient: false },
  };
  return [
    propose('reads a new day', 'search_rooms', { day: `d${turn}` }),
    propose('valid write', 'book_room', { room: 'A' }),
    { type: 'model: answer', event: said({ type: 'model.answered', at, text: 'Room A is booked.', usage: USAGE }) },
    { type: 'model: prompt too long', tooLong: true, event: { type: 'xstate.done.actor.model', output: failed } },
  ];
}

/** The summariser's answers (`compacting`); a model summary only when the chart reserved its turn. */
export function summariseMoves(world: World): Move[] {
  const { context } = world.machine;
  const at = world.shadow.now;
  const state = context.compaction;
  const through = (state.summary?.throughIndex ?? 0) + 2;
  const done = (output: Partial<SummariseActorOutput>): MachineEvent => ({
    type: 'xstate.done.actor.summarise',
    output: {
      at,
      summary: null,
      replaced: null,
      summaryBytes: 0,
      summaryHash: null,
      tokensBefore: state.tokens,
      tokensAfter: state.tokens,
      usage: null,
      ...output,
    },
  });
  const replaced = (source: 'model' | 'facts', fallback: string | null, tokensAfter: number) => ({
    summary: {
      text: `turns up to ${context.turn} (${source})`,
      source,
      fallback,
      throughIndex: through,
      throughTurn: context.turn,
    },
    replaced: { fromIndex: through - 2, toIndex: through, entries: 2, turns: 1, hash: `sha256:${through}` },
    summaryBytes: 20,
    summaryHash: `sha256:s${through}`,
    tokensAfter,
  });
  const below = 10;
  const over = (state.atTokens ?? 0) + 5;
  const moves: Move[] = [];
  if (state.reserved) {
    moves.push(
      { type: 'summarise: model summary', event: done({ ...replaced('model', null, below), usage: SUMMARY_USAGE }) },
      {
        type: 'summarise: model summary, still over the threshold',
        event: done({ ...replaced('model', null, over), usage: SUMMARY_USAGE }),
      },
      {
        type: 'summarise: the model failed, facts note instead',
        event: done({ ...replaced('facts', 'the model summariser failed', below), usage: SUMMARY_USAGE }),
      },
    );
  } else {
    moves.push({
      type: 'summarise: facts note (no model turn reserved)',
      event: done(replaced('facts', 'the budget held no model turn for it', below)),
    });
  }
  moves.push(
    { type: 'summarise: nothing older to replace', event: done({}) },
    { type: 'summarise: fails', event: { type: 'xstate.error.actor.summarise', error: 'summariser crashed' } },
  );
  return moves;
}

/** The compaction world's alphabet: what its states take, narrowed (cancels and restarts only while compacting). */
export function compactionAlphabet(world: World, all: Move[]): Move[] {
  const value = valueOf(world.machine);
  if (value === 'compacting') return all;
  const keep = new Set(['reads: ok', 'validate: pass', 'authorize: pass', 'recheck: pass', 'write: ok']);
  return all.filter((m) => m.type.startsWith('model: ') || keep.has(m.type));
}

const stopCode = (world: World) => world.machine.context.outcome?.reason.code ?? null;

/** The compaction world's rules on one transition (empty elsewhere). */
export function compactionEdgeProblems(
  prev: World,
  move: Move,
  next: World,
  input: AgentInput,
  count: (what: string) => void,
): string[] {
  const record = next.shadow.compaction;
  if (!record) return [];
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const [from, to] = [valueOf(prev.machine), valueOf(next.machine)];
  const [before, after] = [prev.machine.context, next.machine.context];
  const event = move.event;
  const turnStarted = after.turn > before.turn && to === 'thinking';

  if (entersCompaction(prev.machine, move, next.machine)) {
    // C1: once per turn.
    const times = record.entries.filter((t) => t === after.turn).length;
    if (times > 1) fail('C1 compaction', `compacting entered ${times} times at turn ${after.turn}, after ${move.type}`);
    count(move.tooLong ? 'compacting for a refused prompt' : 'compacting near the limit');
    // C7: the summariser's model turn leaves room for the turn it compacts for.
    const reserved = after.compaction.reserved;
    const { limits, used } = after.budget;
    if (
      reserved &&
      (after.compaction.summariser !== 'model' || limits.tokens - used.tokens < input.modelReservation.tokens)
    )
      fail('C7 compaction', `a summariser's turn is reserved with ${limits.tokens - used.tokens} tokens left`);
    if (reserved) count('model summariser turn reserved');
  }
  // C2: no turn over the threshold unless compacted right before.
  const { atTokens, tokens } = after.compaction;
  if (turnStarted && atTokens !== null && tokens >= atTokens && !record.entries.includes(after.turn - 1))
    fail(
      'C2 compaction',
      `turn ${after.turn} is asked with ${tokens} estimated tokens (threshold ${atTokens}) without compacting`,
    );

  // C3, C4, C6, C7 on the summariser's answer.
  if (from === 'compacting' && !move.restart && event?.type === 'xstate.done.actor.summarise') {
    const out = event.output;
    count(move.type);
    const requested = prev.shadow.compaction?.underWay?.requested ?? false;
    const { compaction: _a, budget: _b, turn: _t, offered: _o, ...kept } = variableContext(before);
    const { compaction: _c, budget: _d, turn: _u, offered: _p, ...now } = variableContext(after);
    if (!FINAL_STATES.has(to) && JSON.stringify(kept) !== JSON.stringify(now))
      fail('C3 compaction', `the summariser's answer changed the task beyond its compaction record (${move.type})`);
    if (JSON.stringify(after.evidence) !== JSON.stringify(before.evidence))
      fail('C3 compaction', 'the evidence changed');
    const summary = after.compaction.summary;
    if (to !== 'compacting') {
      if (out.summary === null && JSON.stringify(summary) !== JSON.stringify(before.compaction.summary))
        fail('C3 compaction', 'a compaction that replaced nothing changed the summary');
      if (
        out.summary !== null &&
        (summary?.text !== out.summary.text ||
          summary.source !== out.summary.source ||
          summary.fallback !== out.summary.fallback ||
          summary.throughIndex < (before.compaction.summary?.throughIndex ?? 0))
      )
        fail('C3 compaction', `the summary recorded is not the summariser's: ${JSON.stringify(summary)}`);
      if (after.compaction.count !== before.compaction.count + (out.summary ? 1 : 0))
        fail('C3 compaction', `count ${before.compaction.count} became ${after.compaction.count}`);
      if (!FINAL_STATES.has(to) && after.compaction.tokens !== out.tokensAfter)
        fail('C3 compaction', `the estimate is ${after.compaction.tokens}, the summariser said ${out.tokensAfter}`);
    }
    // C4: nothing older to replace after a refusal stops, and only that.
    const uncompactable = requested && out.summary === null;
    if (uncompactable && (to !== 'failed' || stopCode(next) !== 'context_too_long'))
      fail('C4 compaction', `a refused prompt with nothing older to replace leads to ${to} (${stopCode(next)})`);
    if (!uncompactable && stopCode(next) === 'context_too_long')
      fail(
        'C4 compaction',
        `a compaction that ${out.summary ? 'replaced' : 'was not asked for by a refusal'} stops context_too_long`,
      );
    if (uncompactable) count('refused prompt with nothing older: stopped');
    if (out.summary?.fallback) count('facts note instead of the summariser');
    // C7: settled to what it spent.
    const underWay = prev.shadow.compaction?.underWay;
    const reserved = before.compaction.reserved;
    if (underWay && turnStarted) {
      const spent = out.usage ? out.usage.inputTokens + out.usage.outputTokens : 0;
      const turn = input.modelReservation.tokens;
      const expected = underWay.usedTokens - (reserved?.tokens ?? 0) + spent + turn;
      if (after.budget.used.tokens !== expected)
        fail('C7 compaction', `tokens used ${after.budget.used.tokens} after the summary, expected ${expected}`);
    }
    if (turnStarted) count(`model turn after compacting (${move.type})`);
  }
  // C5: a refused prompt compacts, unless compacted right before.
  if (from === 'thinking' && move.tooLong) {
    const right = prev.shadow.compaction!.entries.includes(before.turn - 1);
    if (right && (to !== 'failed' || stopCode(next) !== 'context_too_long'))
      fail('C5 compaction', `a prompt refused right after compacting leads to ${to} (${stopCode(next)})`);
    if (!right && to !== 'compacting') fail('C5 compaction', `a prompt refused as too long leads to ${to}`);
    count(right ? 'refused right after compacting: stopped' : 'refused prompt compacted');
  }
  // C6: a summariser that fails stops the task.
  if (from === 'compacting' && event?.type === 'xstate.error.actor.summarise' && stopCode(next) !== 'internal_error')
    fail('C6 compaction', `a failed summariser leads to ${to} (${stopCode(next)})`);
  if (move.restart && from === 'compacting') count('restart while compacting');
  return problems;
}
