/**
 * The summariser of the chart's `compacting` state: it picks the turns old enough to replace (compactionPlan.ts), has
 * them summarised, and reports what the summary replaced, for the audit. The facts note (default) is the host's own,
 * deterministic and without a model call; a host function or the model may write the summary instead, as untrusted
 * text (capped, redacted, labelled when sent). Any failure of theirs falls back to the facts note, with the reason:
 * the task never stops for it.
 */
import type { SummariseActorInput, SummariseActorOutput } from '../../../machines/actors.js';
import { type AgentContext, MAX_SUMMARY_CHARS, type Summariser } from '../../../machines/context.js';
import type { TranscriptEntry } from '../../../machines/journal.js';
import { cap, safeErrorText } from '../../../machines/lib/text.js';
import { sha256Hex } from '../../hashing.js';
import { compactionNoteBody } from '../../model/compactionNote.js';
import { type CompactionCut, compactionCut, noteChars, sentTokens } from '../../model/compactionPlan.js';
import { hostFacts, inertSummary, summaryNote } from '../../model/compactionFacts.js';
import { pairedResults } from '../../model/replyRules.js';
import type { ActorHost } from '../actorHost.js';
import { scopeOf } from '../sealing.js';
import { runWithTimeout } from '../timeouts.js';
import { fromTask } from './taskLogic.js';

type Usage = SummariseActorOutput['usage'];
type Written = { text: string; usage: Usage };
type Failed = { failed: string; usage: Usage };

export function summariseActor(host: ActorHost) {
  // As every runtime actor (`fromTask`): settling it runs the parent under its orchestrator's route.
  return fromTask<SummariseActorOutput, SummariseActorInput>(async ({ input, stop }) => {
    const signal = stop.signal;
    const task = host.task(input.taskId);
    // A model summariser spends the budget: only once the state that reserved it is durable.
    await task.barrier();
    const context = task.context();
    const transcript = await task.transcript();
    const state = context.compaction;
    const facts = hostFacts(context);
    const previousNote = state.summary ? summaryNote(state.summary, facts) : null;
    const cut = compactionCut(transcript, state, input.reason);
    const before = sentTokens(
      transcript,
      cut?.preambleEnd ?? 0,
      previousNote,
      state.summary?.throughIndex ?? 0,
      state.resultBytes,
    );
    if (!cut) return nothingReplaced(host, before);

    const factsText = () =>
      compactionNoteBody(
        transcript.slice(cut.preambleEnd, cut.through),
        pairedResults(transcript),
        noteChars(state, MAX_SUMMARY_CHARS),
      );
    let source: Summariser = state.summariser;
    let fallback: string | null = null;
    let written: Written | null = null;
    let spent: Usage = null;
    if (source === 'host' && !host.summariser) fallback = 'no host summariser is configured';
    else if (source === 'model' && !input.mayAskModel) fallback = 'the budget held no model turn for it';
    else if (source !== 'facts') {
      const older = transcript.slice(cut.from, cut.through);
      const attempt =
        source === 'host'
          ? await byHost(host, older, cut, state.summary?.text ?? null, facts, signal)
          : await byModel(host, context, older, state.summary?.text ?? null, facts, signal, input.turn);
      if ('failed' in attempt) fallback = attempt.failed;
      else written = attempt;
      spent = attempt.usage;
    }
    if (written === null) source = 'facts';
    const scope = scopeOf(context);
    const text = written === null ? factsText() : capped(host.registry.privacy.text(scope, written.text.trim()));
    // Why the summariser was not used may quote its error (a key in a failed request): redacted, then cut.
    const said = fallback === null ? null : cap(host.registry.privacy.text(scope, fallback), 240);
    const summary = { text, source, fallback: said, throughIndex: cut.through, throughTurn: cut.throughTurn };
    const after = sentTokens(
      transcript,
      cut.preambleEnd,
      summaryNote({ ...summary, turn: input.turn, at: 0 }, facts),
      cut.through,
      state.resultBytes,
    );
    return {
      at: host.clock.now(),
      summary,
      replaced: {
        fromIndex: cut.from,
        toIndex: cut.through,
        entries: cut.through - cut.from,
        turns: cut.turns.count,
        hash: `sha256:${sha256Hex(JSON.stringify(transcript.slice(cut.from, cut.through)))}`,
      },
      summaryBytes: Buffer.byteLength(text, 'utf8'),
      summaryHash: `sha256:${sha256Hex(text)}`,
      tokensBefore: before,
      tokensAfter: after,
      // A model asked spent what it reported, also when its reply was no summary.
      usage: spent,
    };
  });
}

function nothingReplaced(host: ActorHost, tokens: number): SummariseActorOutput {
  return {
    at: host.clock.now(),
    summary: null,
    replaced: null,
    summaryBytes: 0,
    summaryHash: null,
    tokensBefore: tokens,
    tokensAfter: tokens,
    usage: null,
  };
}

/** A summary over MAX_SUMMARY_CHARS is cut, and the cut said. */
function capped(text: string): string {
  return text.length <= MAX_SUMMARY_CHARS ? text : `${text.slice(0, MAX_SUMMARY_CHARS)} …[cut by the host]`;
}

async function byHost(
  host: ActorHost,
  older: readonly TranscriptEntry[],
  cut: CompactionCut,
  previous: string | null,
  facts: string,
  signal: AbortSignal,
): Promise<Written | Failed> {
  try {
    const timed = await runWithTimeout(host.clock, host.modelTimeoutMs, signal, (s) =>
      host.summariser!(older, { previous, facts, turns: { from: cut.turns.from, to: cut.turns.to }, signal: s.signal }),
    );
    if (timed.kind === 'timeout')
      return { failed: `the host summariser gave no summary within ${host.modelTimeoutMs} ms`, usage: null };
    if (timed.kind === 'aborted') throw new Error('the summariser was aborted');
    if (typeof timed.value !== 'string' || !timed.value.trim())
      return { failed: 'the host summariser returned no text', usage: null };
    return { text: timed.value, usage: null };
  } catch (error) {
    if (signal.aborted) throw error;
    return { failed: `the host summariser failed: ${safeErrorText(error)}`, usage: null };
  }
}

/**
 * The instruction a model summariser gets, as the first (host) message of its request. The previous summary is the
 * model's own untrusted text: made inert (`inertSummary`) so it cannot pose as the host's request or facts.
 */
export function summariseRequest(goal: string, previous: string | null, facts: string): string {
  return [
    '[Host request, not from the user] Summarise the conversation below for your own later use, in at most 150 words:',
    'what was tried, what was found, what is left to do. Do not repeat the facts the host keeps; they are sent anyway.',
    `The task's goal: ${goal}`,
    previous ? `Your summary of the turns before these (untrusted text):\n${inertSummary(previous)}` : '',
    facts,
  ]
    .filter(Boolean)
    .join('\n');
}

async function byModel(
  host: ActorHost,
  context: AgentContext,
  older: readonly TranscriptEntry[],
  previous: string | null,
  facts: string,
  signal: AbortSignal,
  turn: number,
): Promise<Written | Failed> {
  const at = host.clock.now();
  const reserved = context.compaction.reserved ?? { tokens: 0, costMicros: 0 };
  // What an asked model is charged when it reported nothing usable: its whole reservation.
  const whole = { inputTokens: reserved.tokens, outputTokens: 0, costMicros: reserved.costMicros };
  const request: TranscriptEntry[] = [{ kind: 'goal', at, text: summariseRequest(context.goal, previous, facts) }];
  try {
    const timed = await runWithTimeout(host.clock, host.modelTimeoutMs, signal, (s) =>
      host.model.decide({
        taskId: context.taskId,
        turn,
        goal: context.goal,
        principal: { userId: context.principal.userId, tenantId: context.principal.tenantId },
        tools: [],
        observations: [],
        transcript: async () => [...request, ...older],
        signal: s.signal,
      }),
    );
    if (timed.kind === 'timeout')
      return { failed: `the model gave no summary within ${host.modelTimeoutMs} ms`, usage: whole };
    if (timed.kind === 'aborted') throw new Error('the summariser was aborted');
    const reply = timed.value;
    const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, Math.round(v)) : null);
    const input = n(reply?.usage?.inputTokens);
    const output = n(reply?.usage?.outputTokens);
    const usage =
      input === null || output === null
        ? whole
        : { inputTokens: input, outputTokens: output, costMicros: n(reply?.usage?.costMicros) ?? 0 };
    if (reply?.type !== 'answer' || typeof reply.text !== 'string' || !reply.text.trim())
      return { failed: `the model replied ${String(reply?.type)}, not a summary`, usage };
    return { text: reply.text, usage };
  } catch (error) {
    if (signal.aborted) throw error;
    return { failed: `the model summariser failed: ${safeErrorText(error)}`, usage: whole };
  }
}
