/**
 * The write actor. Restart rule: XState re-runs the invocations of a restored snapshot; a write is not safe to run
 * again, so a write executor started during a restore reports "interrupted" and the machine reconciles by the
 * idempotency key instead. A first run waits until its intent is durable and checks for a cancel just before the
 * side effect; any failure that leaves the effect in doubt is reported as unknown, never as "did not happen".
 */
import type { CallOutcome, WriteActorInput, WriteActorOutput } from '../../../machines/actors.js';
import { WRITE_OUTCOME_UNKNOWN } from '../../../machines/failures.js';
import type { CallCode } from '../../../machines/failures.js';
import type { WriteTool } from '../../tool.js';
import type { ActorHost } from '../actorHost.js';
import { argumentsHash } from '../../../machines/lib/hashing.js';
import { scopeOf } from '../sealing.js';
import type { Cancel } from '../timeouts.js';
import { fromTask } from './taskLogic.js';
import { attemptTool, describeOutcome, parseArguments, principalCopy, toolSpanAttributes } from './callAttempt.js';

export function writeActor(host: ActorHost) {
  const { clock } = host;
  return fromTask<WriteActorOutput, WriteActorInput>(async ({ input, stop }) => {
    const task = host.task(input.taskId);
    // Captured synchronously: true only when this invocation is XState re-running a restored one.
    if (task.restoring) {
      const summary = 'the process stopped while this write was in flight; its outcome must be looked up';
      return { at: clock.now(), durationMs: 0, outcome: { kind: 'unknown', code: 'interrupted', summary } };
    }
    const started = clock.now();
    // The snapshot holding this write's intent (idempotency key, args hash) must be durable first.
    await task.barrier();
    // A cancel that arrived meanwhile wins: this is the last moment before the side effect.
    if (task.context().cancelRequested) {
      const summary = 'not sent: the task was cancelled before the write started';
      return {
        at: clock.now(),
        durationMs: 0,
        outcome: { kind: 'error', code: 'cancelled', summary, retryable: false },
      };
    }
    const outcome = await runWrite(host, input, stop);
    return { at: clock.now(), outcome, durationMs: Math.max(0, clock.now() - started) };
  });
}

async function runWrite(host: ActorHost, input: WriteActorInput, stop: Cancel): Promise<CallOutcome> {
  const tool = host.registry.get(input.call.tool) as WriteTool | undefined;
  if (!tool || tool.effect !== 'write') {
    return { kind: 'error', code: 'unknown_tool', summary: `no write tool named ${input.call.tool}`, retryable: false };
  }
  // The last check before the side effect: the arguments that leave are the ones hashed, keyed and confirmed.
  if (argumentsHash(host.registry.toolkit.sha256, input.call.args) !== input.argsHash) {
    return {
      kind: 'error',
      code: 'arguments_changed',
      summary: 'the arguments differ from the ones validated and confirmed; the write was not sent',
      retryable: false,
    };
  }
  const { privacy } = host.registry;
  // A sealed value this process cannot open (a memory sealer's, after a restart): the write is not sent.
  const args = parseArguments(privacy, scopeOf(host.task(input.taskId).context()), tool, input.call.args);
  if (!args.ok) return { kind: 'error', code: args.code, summary: args.summary, retryable: false };
  const outcome = await host.tracing.span(
    input.taskId,
    `execute_tool ${tool.name}`,
    toolSpanAttributes(tool, input.call.callId, input.attempt, input.idempotencyKey),
    () =>
      attemptTool(
        host.clock,
        tool,
        stop,
        (s) =>
          tool.execute(args.value, {
            taskId: input.taskId,
            callId: input.call.callId,
            principal: principalCopy(input.principal),
            signal: s.signal,
            attempt: input.attempt,
            idempotencyKey: input.idempotencyKey,
          }),
        args.sealing,
      ),
    describeOutcome,
  );
  if (outcome.kind === 'error' && outcome.code === 'needs_review')
    return { kind: 'review', code: 'needs_review', summary: outcome.summary };
  if (outcome.kind !== 'error' || !WRITE_OUTCOME_UNKNOWN.has(outcome.code)) {
    // A result the service returned itself (conflict, not_found...) is a business outcome, reported to the model.
    return outcome;
  }
  // The request may have reached the service: the effect may exist. Look it up; never re-run blindly.
  const summary =
    outcome.code === 'timeout'
      ? `${tool.name} did not answer within ${tool.timeoutMs} ms; it may have been applied`
      : `${outcome.summary}; it may have been applied`;
  return { kind: 'unknown', code: outcome.code as CallCode, summary };
}
