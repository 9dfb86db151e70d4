/** The reads actor: one step's reads run concurrently; transient failures retry within the tool's policy and budget. */
import type { CallOutcome, CallRef, ReadResult, ReadsActorInput, ReadsActorOutput } from '../../../machines/actors.js';
import type { Principal } from '../../../machines/context.js';
import { backoffDelay, sleep } from '../../clock.js';
import type { ReadTool } from '../../tool.js';
import type { ActorHost } from '../actorHost.js';
import type { Cancel } from '../timeouts.js';
import { fromTask } from './taskLogic.js';
import { NO_TRACING } from '../tracing.js';
import { scopeOf } from '../sealing.js';
import { attemptTool, describeOutcome, parseArguments, principalCopy, toolSpanAttributes } from './callAttempt.js';

export function readsActor(host: ActorHost) {
  return fromTask<ReadsActorOutput, ReadsActorInput>(async ({ input, stop }) => {
    const allowance = { left: input.retryAllowance };
    // A step of one read (the usual one) awaits it alone: `Promise.all` makes a list, a callback and a resolver each.
    const calls = input.calls;
    const results =
      calls.length === 1
        ? [await runRead(host, input.taskId, input.principal, calls[0]!, allowance, stop)]
        : await Promise.all(calls.map((call) => runRead(host, input.taskId, input.principal, call, allowance, stop)));
    return { at: host.clock.now(), results, retriesUsed: input.retryAllowance - allowance.left };
  });
}

async function runRead(
  host: ActorHost,
  taskId: string,
  principal: Principal,
  call: CallRef,
  allowance: { left: number },
  stop: Cancel,
): Promise<ReadResult> {
  const started = host.clock.now();
  const tool = host.registry.get(call.tool) as ReadTool | undefined;
  const finish = (outcome: CallOutcome, attempts: number): ReadResult => ({
    callId: call.callId,
    outcome,
    attempts,
    durationMs: Math.max(0, host.clock.now() - started),
  });
  if (!tool || tool.effect !== 'read') {
    return finish(
      { kind: 'error', code: 'unknown_tool', summary: `no read tool named ${call.tool}`, retryable: false },
      0,
    );
  }
  const { privacy } = host.registry;
  const args = parseArguments(privacy, scopeOf(host.task(taskId).context()), tool, call.args);
  if (!args.ok)
    return finish(
      { kind: 'error', code: args.code, summary: args.summary, retryable: args.code === 'invalid_arguments' },
      0,
    );
  const limit = await host.rateLimits.consume(tool, principal.tenantId);
  if (!limit.ok) return finish({ kind: 'error', code: limit.code, summary: limit.summary, retryable: false }, 0);
  const maxAttempts = tool.retry?.maxAttempts ?? 1;
  for (let attempt = 1; ; attempt++) {
    const run = () =>
      attemptTool(
        host.clock,
        tool,
        stop,
        (s) =>
          tool.execute(args.value, {
            taskId,
            callId: call.callId,
            principal: principalCopy(principal),
            // Made only if the tool looks: most reads that answer at once never do.
            get signal() {
              return s.signal;
            },
            attempt,
          }),
        args.sealing,
      );
    // Without tracing (the default), the span's name and attributes are not even made.
    const outcome = await (host.tracing === NO_TRACING
      ? run()
      : host.tracing.span(
          taskId,
          `execute_tool ${tool.name}`,
          toolSpanAttributes(tool, call.callId, attempt),
          run,
          describeOutcome,
        ));
    // A read has no review desk: a tool's `needs_review` is a business failure the model is told of.
    const transient = outcome.kind === 'error' && outcome.retryable;
    if (!transient || attempt >= maxAttempts || allowance.left <= 0 || stop.aborted) {
      if (outcome.kind === 'error' && outcome.code === 'timeout') {
        const attempts = `${attempt} attempt${attempt > 1 ? 's' : ''}`;
        return finish(
          {
            ...outcome,
            summary: `${tool.name} did not answer within ${tool.timeoutMs} ms (${attempts}); the result is unknown, not empty`,
          },
          attempt,
        );
      }
      return finish(outcome, attempt);
    }
    allowance.left -= 1;
    try {
      await sleep(host.clock, backoffDelay(attempt - 1, tool.retry!, host.random), stop.signal);
    } catch {
      return finish(outcome, attempt);
    }
  }
}
