/**
 * The model actor: asks the model for one turn, with a timeout and transport retries against the retry budget,
 * and resolves with exactly one validated `model.*` event, or with the failure as data.
 */
import type { ModelActorInput, ModelActorOutput, ModelCompaction } from '../../../machines/actors.js';
import type { AgentContext, Provenance } from '../../../machines/context.js';
import { type ModelEvent, RECEIVED, modelEventSchema } from '../../../machines/events.js';
import { MODEL_FAILURE_CODES, type ModelFailureCode } from '../../../machines/failures.js';
import { cap, safeErrorText, zodSummary } from '../../../machines/lib/text.js';
import { backoffDelay, sleep } from '../../clock.js';
import {
  type ModelReply,
  type ModelReplyWithVersion,
  type ModelRequest,
  type OfferedTool,
  TransientModelError,
  modelProvenance,
} from '../../model/agentModel.js';
import type { ActorHost } from '../actorHost.js';
import { scopeOf, sealModelEvent, sealReceived } from '../sealing.js';
import { liveText } from './modelLive.js';
import { runWithTimeout } from '../timeouts.js';
import { NO_TRACING } from '../tracing.js';
import { fromTask } from './taskLogic.js';
import { canProposePlan } from '../../../machines/lib/plan.js';
import { PLAN_TOOL } from '../../../machines/plans.js';
import { PLAN_TOOL_DEFINITION, decisionTools } from '../hostTools.js';
import { DECISION_TOOL } from '../../../machines/workflows.js';
import { hostFacts, summaryNote } from '../../model/compactionFacts.js';

export function modelActor(host: ActorHost) {
  const { clock } = host;
  return fromTask<ModelActorOutput, ModelActorInput>(async ({ input, stop }) => {
    const task = host.task(input.taskId);
    // The turn is paid for only once the state that debits it is durable. Waiting here also yields to the event
    // loop between turns, so a task whose tools and model answer at once cannot starve other work.
    await task.barrier();
    const context = task.context();
    // The chart compacted the conversation: its summary and the host's facts stand for the older entries.
    const stored = context.compaction.summary;
    const summary = stored
      ? { throughIndex: stored.throughIndex, text: summaryNote(stored, hostFacts(context)) }
      : undefined;
    let retriesUsed = 0;
    // Set once the provider refused the prompt as too long: the turn is asked once more, compacted harder.
    let compaction: ModelCompaction | undefined;
    let attempt = -1;
    for (;;) {
      attempt += 1;
      const live = liveText(host, input.taskId, input.turn, attempt, scopeOf(context));
      const ask = () =>
        runWithTimeout(clock, host.modelTimeoutMs, stop, (s) => {
          const request: ModelRequest = {
            taskId: input.taskId,
            turn: input.turn,
            goal: context.goal,
            principal: { userId: context.principal.userId, tenantId: context.principal.tenantId },
            tools: toolsOffered(host, context),
            observations: input.observations,
            transcript: () => task.transcript(),
            // Made only if the model looks (an AbortController costs about 3 µs): one that answers at once never does.
            get signal() {
              return s.signal;
            },
          };
          // Set after, in the same order: a literal spreading `{}` for each absent one makes three objects a turn.
          if (compaction) request.compaction = { level: compaction.level };
          if (summary) request.summary = summary;
          if (live) {
            request.onText = live.push;
            request.onCallText = live.call;
          }
          return host.model.decide(request).then(asAnswered, asRefused);
        });
      // The GenAI semantic conventions' names: operation, model, token usage. Without tracing (the default), the
      // span's name and attributes are not even made.
      const timed = await (host.tracing === NO_TRACING
        ? ask()
        : host.tracing.span(
            input.taskId,
            `chat ${host.model.name}`,
            {
              'gen_ai.operation.name': 'chat',
              'gen_ai.request.model': host.model.name,
              'statechart_agent.turn': input.turn,
              'statechart_agent.model.retry': retriesUsed,
            },
            ask,
            (timed) => {
              if (timed.kind !== 'done') return { error: `model call ${timed.kind}` };
              if (!timed.value.ok) return { error: safeErrorText(timed.value.error) };
              const usage = timed.value.reply?.usage;
              const finite = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) ? { value: n } : null);
              const inputTokens = finite(usage?.inputTokens);
              const outputTokens = finite(usage?.outputTokens);
              return {
                attributes: {
                  'statechart_agent.reply.type': String(timed.value.reply?.type),
                  ...(inputTokens ? { 'gen_ai.usage.input_tokens': inputTokens.value } : {}),
                  ...(outputTokens ? { 'gen_ai.usage.output_tokens': outputTokens.value } : {}),
                },
              };
            },
          ));
      const answered = timed.kind === 'done' ? timed.value : null;
      if (answered?.ok) live?.finish();
      else live?.discard();
      if (timed.kind === 'aborted') throw new Error('the model call was aborted');
      if (answered?.ok) {
        // Sealed before the chart (and so the snapshot, the journals and every stream) sees it. An unusable output's
        // texts are sealed before they are cut for the audit: a cut must not leave part of a value.
        const scope = scopeOf(context);
        const reply = answered.reply;
        const raw =
          reply?.type === 'invalid'
            ? {
                ...reply,
                detail:
                  typeof reply.detail === 'string' ? host.registry.privacy.text(scope, reply.detail) : reply.detail,
                ...(typeof reply.received === 'string'
                  ? { received: sealReceived(host.registry, scope, reply.received) }
                  : {}),
              }
            : reply;
        const event = sealModelEvent(host.registry, scope, toModelEvent(raw, clock.now(), context.modelReservation));
        const provenance = provenanceOf(host, answered.reply);
        return {
          kind: 'replied',
          at: clock.now(),
          retriesUsed,
          event,
          provenance,
          ...(compaction ? { compaction } : {}),
        };
      }
      const error = answered?.ok === false ? answered.error : undefined;
      const failure =
        answered === null
          ? { transient: true, message: `no answer within ${host.modelTimeoutMs} ms`, retryAfterMs: undefined }
          : {
              transient: error instanceof TransientModelError,
              message: safeErrorText(error),
              retryAfterMs: error instanceof TransientModelError ? error.retryAfterMs : undefined,
            };
      const code = failureCode(error, failure.transient);
      if (code === 'context_too_long' && !compaction) {
        // Once: the same turn with only its newest turn whole and the rest as a shorter note. Not a transport retry.
        compaction = { level: 1, after: 'context_too_long', message: failure.message };
        continue;
      }
      if (!failure.transient || retriesUsed >= input.retryAllowance) {
        // The retries were spent even though the turn failed: the machine debits them from the budget.
        const message = failure.transient
          ? `${failure.message} (after ${retriesUsed} retries)`
          : compaction && code === 'context_too_long'
            ? `${failure.message} (also when asked again with the conversation compacted harder)`
            : failure.message;
        return {
          kind: 'failed',
          at: clock.now(),
          retriesUsed,
          failure: { code, message, transient: failure.transient },
        };
      }
      const delay = Math.max(failure.retryAfterMs ?? 0, backoffDelay(retriesUsed, host.backoff, host.random));
      retriesUsed += 1;
      await sleep(clock, delay, stop.signal);
    }
  });
}

/** What the model's `decide` settled with, as data (one function each for every turn). */
const asAnswered = (reply: ModelReplyWithVersion) => ({ ok: true as const, reply });
const asRefused = (error: unknown) => ({ ok: false as const, error });

/** The tools offered to the model this turn: the host's, narrowed by the offer rule and a sub-task's subset, then the host's own. */
function toolsOffered(host: ActorHost, context: AgentContext) {
  const tools: OfferedTool[] = [];
  for (const tool of host.registry.offeredTo(context.principal)) {
    if (context.offered !== null && !context.offered.includes(tool.name)) continue;
    // A sub-task is offered only the subset of tools its parent gave it.
    if (context.tools !== null && !context.tools.includes(tool.name)) continue;
    tools.push(tool);
  }
  if (canProposePlan(context)) tools.push(PLAN_TOOL_DEFINITION);
  for (const tool of decisionTools(context, host.registry.toolkit)) tools.push(tool);
  return tools;
}

const REFUSAL_CODES: ReadonlySet<string> = new Set(MODEL_FAILURE_CODES.filter((c) => c !== 'model_unavailable'));

/**
 * The stop code of a failed turn: a refusal's own code when the adapter gave one (`model_auth_failed`,
 * `context_too_long`...), else `model_unavailable` (the provider stayed unreachable, or a host's model failed).
 */
function failureCode(error: unknown, transient: boolean): ModelFailureCode {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return !transient && typeof code === 'string' && REFUSAL_CODES.has(code)
    ? (code as ModelFailureCode)
    : 'model_unavailable';
}

/**
 * The model behind a turn: the configured id, the version the host pinned or else the one the provider reported for
 * this reply (a string, capped; anything else is ignored), and the adapter's prompt version.
 */
function provenanceOf(host: ActorHost, reply: ModelReplyWithVersion | undefined): Provenance {
  const base = modelProvenance(host.model);
  const reported = reply?.modelVersion;
  const version =
    base.model.version ?? (typeof reported === 'string' && reported.trim() ? cap(reported.trim(), 200) : null);
  return { ...base, model: { id: cap(base.model.id, 200), version } };
}

/**
 * Turns an adapter's reply into a validated `model.*` event; anything malformed becomes `model.invalidOutput`.
 * Usage that is not a finite number (NaN, Infinity, a string) is charged as the turn's whole `reservation`: it would
 * otherwise disable the token and cost budgets (NaN compares false) and be persisted as null.
 */
export function toModelEvent(
  reply: ModelReply,
  at: number,
  reservation: { tokens: number; costMicros: number } = { tokens: 0, costMicros: 0 },
): ModelEvent {
  const reported = [reply?.usage?.inputTokens, reply?.usage?.outputTokens, reply?.usage?.costMicros];
  const unusable = reported.some((n) => n !== undefined && (typeof n !== 'number' || !Number.isFinite(n)));
  const count = (n: number | undefined) => Math.max(0, Math.round(n ?? 0));
  const usage = unusable
    ? { inputTokens: reservation.tokens, outputTokens: 0, costMicros: reservation.costMicros }
    : { inputTokens: count(reported[0]), outputTokens: count(reported[1]), costMicros: count(reported[2]) };
  let candidate: unknown;
  const hostTool = reply?.type === 'tool_calls' ? (reply.calls ?? []).find((c) => HOST_TOOLS.has(c?.name)) : undefined;
  if (reply?.type === 'tool_calls' && hostTool) return hostToolEvent(reply, hostTool.name, at, usage);
  switch (reply?.type) {
    case 'tool_calls':
      candidate = {
        type: 'model.toolsProposed',
        at,
        text: reply.text ?? null,
        usage,
        calls: (reply.calls ?? []).map((c) =>
          c.callId === undefined
            ? { name: c.name, arguments: c.arguments }
            : { callId: c.callId, name: c.name, arguments: c.arguments },
        ),
      };
      break;
    case 'answer':
      candidate = { type: 'model.answered', at, text: reply.text, usage };
      break;
    case 'ask_user':
      candidate = { type: 'model.askedUser', at, question: reply.question, usage };
      break;
    case 'refusal':
      candidate = { type: 'model.refused', at, reason: reply.reason, usage };
      break;
    case 'invalid':
      candidate = {
        type: 'model.invalidOutput',
        at,
        detail: cap(reply.detail),
        received: receivedOf(reply.received),
        usage,
      };
      break;
    default:
      return { type: 'model.invalidOutput', at, detail: 'the model adapter returned an unknown reply type', usage };
  }
  const parsed = modelEventSchema.safeParse(candidate);
  if (parsed.success) return parsed.data;
  return { type: 'model.invalidOutput', at, detail: `unusable model output: ${zodSummary(parsed.error)}`, usage };
}

/** The host's own tools: a call of one is a plan or a decision, never run. */
const HOST_TOOLS: ReadonlySet<unknown> = new Set([PLAN_TOOL, DECISION_TOOL]);

/** A reply that calls `propose_plan` or `submit_decision`: a plan or a decision, when it is the reply's only call. */
function hostToolEvent(
  reply: Extract<ModelReply, { type: 'tool_calls' }>,
  name: string,
  at: number,
  usage: ModelEvent['usage'],
): ModelEvent {
  const [call, ...others] = reply.calls;
  if (others.length > 0) {
    const alone = name === PLAN_TOOL ? 'propose a plan alone, then act on it' : 'give the decision alone';
    return {
      type: 'model.invalidOutput',
      at,
      detail: `${name} was called with other tools in one reply; ${alone}`,
      received: receivedOf(JSON.stringify(reply.calls.map((c) => c?.name))),
      usage,
    };
  }
  const parsed = modelEventSchema.safeParse({
    type: name === PLAN_TOOL ? 'model.planProposed' : 'model.decided',
    at,
    callId: call?.callId,
    arguments: call?.arguments,
    text: reply.text ?? null,
    usage,
  });
  if (parsed.success) return parsed.data;
  return { type: 'model.invalidOutput', at, detail: `unusable ${name} call: ${zodSummary(parsed.error)}`, usage };
}

/** An unusable output as received, cut to what the audit keeps (the cut marked), or null when there was none. */
function receivedOf(received: unknown): string | null {
  if (typeof received !== 'string' || received === '') return null;
  if (received.length <= RECEIVED) return received;
  const note = ` [${received.length - (RECEIVED - 40)} more characters cut]`;
  return received.slice(0, RECEIVED - note.length) + note;
}
