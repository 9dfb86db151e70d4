/**
 * Compaction as a state of the chart: the summariser is asked for a summary of the older turns (`compacting`), which
 * then stands for them in what the model is sent; the full transcript stays in the store and the audit.
 */
import { outputOf } from '../actors.js';
import { modelTurnNeed, debit, releaseTurn, shortfall } from '../lib/budget.js';
import { cap } from '../lib/text.js';
import { auditEntry, timeOf } from '../journal.js';
import { type Step, retriesWithin } from './step.js';
import { stop } from './stop.js';

/**
 * Into `compacting`. A model summariser's call is a model turn's worth of tokens and cost, reserved here like a turn
 * (checked before it is spent). It is asked only while the budget also holds the turn it compacts for: without room
 * for both, the facts note is written instead (said in the audit), so a summary never takes the task's last turn.
 */
export const startCompaction: Step = (context, event) => {
  const { compaction } = context;
  const need = modelTurnNeed(context.modelReservation, context.budget);
  const reserve = { tokens: need.tokens ?? 0, costMicros: need.costMicros ?? 0 };
  const both = { ...need, tokens: reserve.tokens * 2, costMicros: reserve.costMicros * 2 };
  const reserved =
    compaction.summariser === 'model' && shortfall(context.budget, both, timeOf(context, event)) === null
      ? reserve
      : null;
  return {
    context: {
      ...(reserved ? { budget: debit(context.budget, reserved) } : {}),
      compaction: { ...compaction, reserved },
    },
    audit: [
      auditEntry(context, event, {
        kind: 'compaction_started',
        reason: compaction.requested ? 'context_too_long' : 'near_limit',
        summariser: compaction.summariser,
        reserved,
      }),
    ],
  };
};

/**
 * The provider refused the turn's prompt as too long (asked again compacted harder too): the turn is charged nothing
 * (no reply, no usage), its retries are debited, and the chart compacts before the next turn.
 */
export const compactForRefusal: Step = (context, event) => {
  const output = outputOf(event, 'model');
  if (output.kind !== 'failed') return {};
  const retries = retriesWithin(context, output.retriesUsed);
  const released = releaseTurn(context.budget, context.modelReservation);
  const refused = {
    ...context,
    budget: retries > 0 ? debit(released, { retries }) : released,
    compaction: { ...context.compaction, requested: { message: cap(output.failure.message, 1_000) } },
  };
  const started = startCompaction(refused, event, {} as never);
  return { ...started, context: { budget: refused.budget, compaction: refused.compaction, ...started.context } };
};

/** Out of `compacting`: the summary recorded (it stands for the entries before `throughIndex`), the call settled. */
export const recordCompaction: Step = (context, event) => {
  const output = outputOf(event, 'summarise');
  const at = timeOf(context, event);
  const { compaction } = context;
  const reserved = compaction.reserved;
  const spent = output.usage
    ? { tokens: output.usage.inputTokens + output.usage.outputTokens, costMicros: output.usage.costMicros }
    : { tokens: 0, costMicros: 0 };
  // Settled to what the summariser's call reported (nothing when the model was not asked).
  const budget = debit(context.budget, {
    tokens: spent.tokens - (reserved?.tokens ?? 0),
    costMicros: spent.costMicros - (reserved?.costMicros ?? 0),
  });
  const summary = output.summary ? { ...output.summary, turn: context.turn, at } : compaction.summary;
  return {
    context: {
      budget,
      compaction: {
        ...compaction,
        // Nothing to replace: the summary stays as it was; the chart does not compact again before the next turn.
        summary: summary ?? null,
        tokens: output.tokensAfter,
        requested: null,
        reserved: null,
        afterTurn: context.turn,
        count: compaction.count + (output.summary ? 1 : 0),
      },
    },
    audit: [
      auditEntry(context, event, {
        kind: 'compaction',
        reason: compaction.requested ? 'context_too_long' : 'near_limit',
        refusal: compaction.requested?.message ?? null,
        source: output.summary?.source ?? null,
        fallback: output.summary?.fallback ?? null,
        replaced: output.replaced,
        throughTurn: output.summary?.throughTurn ?? null,
        tokensBefore: output.tokensBefore,
        tokensAfter: output.tokensAfter,
        summaryBytes: output.summaryBytes,
        summaryHash: output.summaryHash,
        usage: output.usage,
      }),
    ],
  };
};

/**
 * The provider refused the prompt as too long and nothing older was left to summarise: asking again would be refused
 * the same way, so the task stops `context_too_long` (the compaction audited first).
 */
export const stopUncompactable: Step = (context, event) => {
  const recorded = recordCompaction(context, event, {} as never);
  const message = context.compaction.requested?.message ?? 'the prompt is too long for the model';
  const result = stop({ ...context, ...recorded.context }, event, 'failed', {
    code: 'context_too_long',
    message: `the model request failed: ${message}; nothing older was left to summarise`,
  });
  return { ...result, audit: [...(recorded.audit ?? []), ...(result.audit ?? [])] };
};
