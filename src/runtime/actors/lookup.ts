/** The lookup actor: finds a write's effect by its idempotency key, backing off between repeated lookups. */
import { fromPromise } from 'xstate';
import type { LookupActorInput, LookupActorOutput, LookupResult } from '../../../machines/actors.js';
import { toJson } from '../../../machines/lib/arguments.js';
import { safeErrorText, zodSummary } from '../../../machines/lib/text.js';
import { backoffDelay, sleep } from '../../clock.js';
import type { ActorHost } from '../actorHost.js';
import { runWithTimeout } from '../timeouts.js';

export function lookupActor(host: ActorHost) {
  const { clock } = host;
  return fromPromise<LookupActorOutput, LookupActorInput>(async ({ input, signal }) => {
    const started = clock.now();
    const tool = host.registry.get(input.call.tool);
    const { privacy } = host.registry;
    // What the lookup found is a tool result like any other: sealed at the tool's sensitive output paths.
    const sealed = (result: LookupResult): LookupResult => {
      if (result.kind === 'found') return { ...result, value: privacy.json(input.taskId, result.value, tool?.sensitive?.output ?? []) };
      if (result.kind === 'inconclusive') return { ...result, summary: privacy.text(input.taskId, result.summary) };
      return result;
    };
    const done = (result: LookupResult): LookupActorOutput => ({ at: clock.now(), result: sealed(result), durationMs: Math.max(0, clock.now() - started) });
    if (tool?.effect !== 'write') return done({ kind: 'inconclusive', code: 'unknown_tool', summary: `no write tool ${input.call.tool}` });
    if (input.attempt > 1) {
      await sleep(clock, backoffDelay(input.attempt - 2, tool.lookupRetry ?? host.backoff, host.random), signal);
    }
    const timed = await host.tracing.span(
      input.taskId,
      `lookup ${tool.name}`,
      { 'statechart_agent.tool.name': tool.name, 'statechart_agent.idempotency_key': input.idempotencyKey, 'statechart_agent.lookup.attempt': input.attempt },
      () =>
        runWithTimeout(clock, tool.timeoutMs, signal, (s) => tool.lookup(input.idempotencyKey, { taskId: input.taskId, principal: input.principal, signal: s })).catch(
          (error: unknown) => ({ kind: 'error' as const, error }),
        ),
      (timed) => ({
        attributes: { 'statechart_agent.lookup.result': timed.kind === 'done' ? (timed.value.found ? 'found' : 'not_found') : timed.kind },
        ...(timed.kind === 'done' ? {} : { error: `lookup ${timed.kind}` }),
      }),
    );
    if (timed.kind === 'done') {
      if (!timed.value.found) return done({ kind: 'not_found' });
      const parsed = tool.output.safeParse(timed.value.value);
      if (parsed.success) return done({ kind: 'found', value: toJson(parsed.data) });
      return done({ kind: 'inconclusive', code: 'invalid_output', summary: `lookup returned data that does not match the output schema: ${zodSummary(parsed.error)}` });
    }
    if (timed.kind === 'timeout') return done({ kind: 'inconclusive', code: 'timeout', summary: `lookup did not answer within ${tool.timeoutMs} ms` });
    if (timed.kind === 'aborted') return done({ kind: 'inconclusive', code: 'lookup_failed', summary: 'lookup aborted' });
    return done({ kind: 'inconclusive', code: 'lookup_failed', summary: `lookup failed: ${safeErrorText(timed.error)}` });
  });
}
