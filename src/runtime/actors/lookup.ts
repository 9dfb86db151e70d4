/** The lookup actor: finds a write's effect by its idempotency key, backing off between repeated lookups. */
import type { LookupActorInput, LookupActorOutput, LookupResult } from '../../../machines/actors.js';
import { toJson } from '../../../machines/lib/arguments.js';
import { cap, safeErrorText, zodSummary } from '../../../machines/lib/text.js';
import { backoffDelay, sleep } from '../../clock.js';
import type { ActorHost } from '../actorHost.js';
import { openArguments, scopeOf, sealCallText } from '../sealing.js';
import { runWithTimeout } from '../timeouts.js';
import { fromTask } from './taskLogic.js';
import { principalCopy } from './callAttempt.js';

export function lookupActor(host: ActorHost) {
  const { clock } = host;
  return fromTask<LookupActorOutput, LookupActorInput>(async ({ input, stop }) => {
    const started = clock.now();
    const tool = host.registry.get(input.call.tool);
    const { privacy } = host.registry;
    // What the lookup found is a tool result like any other: sealed at the tool's sensitive output paths, with the
    // values the write took (opened here only to find them where the result or an error quotes them).
    const scope = scopeOf(host.task(input.taskId).context());
    const opened = tool ? openArguments(privacy, scope, tool, input.call.args) : null;
    const sealing = tool ? { privacy, scope, tool, opened: opened?.ok ? opened.opened : [] } : null;
    const sealed = (result: LookupResult): LookupResult => {
      if (!sealing) return result;
      if (result.kind === 'found')
        return {
          ...result,
          value: privacy.json(scope, result.value, sealing.tool.sensitive?.output ?? [], sealing.opened),
        };
      if (result.kind === 'inconclusive') return { ...result, summary: cap(sealCallText(sealing, result.summary)) };
      return result;
    };
    const done = (result: LookupResult): LookupActorOutput => ({
      at: clock.now(),
      result: sealed(result),
      durationMs: Math.max(0, clock.now() - started),
    });
    if (tool?.effect !== 'write')
      return done({ kind: 'inconclusive', code: 'unknown_tool', summary: `no write tool ${input.call.tool}` });
    // Rare, and worth seeing: a task reconciling a write is saved as such before it asks (operators and a process
    // that takes over see where it is; the lookup itself is a read, safe to ask again).
    await host.task(input.taskId).barrier();
    if (input.attempt > 1) {
      await sleep(clock, backoffDelay(input.attempt - 2, tool.lookupRetry ?? host.backoff, host.random), stop.signal);
    }
    const timed = await host.tracing.span(
      input.taskId,
      `lookup ${tool.name}`,
      {
        'statechart_agent.tool.name': tool.name,
        'statechart_agent.idempotency_key': input.idempotencyKey,
        'statechart_agent.lookup.attempt': input.attempt,
      },
      () =>
        runWithTimeout(clock, tool.timeoutMs, stop, (s) =>
          tool.lookup(input.idempotencyKey, {
            taskId: input.taskId,
            principal: principalCopy(input.principal),
            signal: s.signal,
          }),
        ).catch((error: unknown) => ({ kind: 'error' as const, error })),
      (timed) => ({
        attributes: {
          'statechart_agent.lookup.result':
            timed.kind === 'done'
              ? timed.value?.found === true
                ? 'found'
                : timed.value?.found === false
                  ? 'not_found'
                  : 'invalid'
              : timed.kind,
        },
        ...(timed.kind === 'done' ? {} : { error: `lookup ${timed.kind}` }),
      }),
    );
    if (timed.kind === 'done') {
      // Only an explicit `found: false` says the write did not happen (it may be sent again): anything else a lookup
      // returns (a host's `{}`, `undefined`, `{ found: 'no' }`) says nothing, and the write's outcome stays unknown.
      const found = (timed.value as { found?: unknown } | null | undefined)?.found;
      if (found === false) return done({ kind: 'not_found' });
      if (found !== true)
        return done({
          kind: 'inconclusive',
          code: 'invalid_output',
          summary: `lookup returned neither { found: true, value } nor { found: false }: ${shapeOf(timed.value)}`,
        });
      const parsed = tool.output.safeParse((timed.value as { value?: unknown }).value);
      if (parsed.success) return done({ kind: 'found', value: toJson(parsed.data) });
      return done({
        kind: 'inconclusive',
        code: 'invalid_output',
        summary: `lookup returned data that does not match the output schema: ${zodSummary(parsed.error)}`,
      });
    }
    if (timed.kind === 'timeout')
      return done({
        kind: 'inconclusive',
        code: 'timeout',
        summary: `lookup did not answer within ${tool.timeoutMs} ms`,
      });
    if (timed.kind === 'aborted')
      return done({ kind: 'inconclusive', code: 'lookup_failed', summary: 'lookup aborted' });
    return done({ kind: 'inconclusive', code: 'lookup_failed', summary: `lookup failed: ${uncut(timed.error)}` });
  });
}

/** What a lookup returned, by shape only (its values may be sensitive): `undefined`, `null`, `an object with keys a, b`. */
function shapeOf(value: unknown): string {
  if (value === null || typeof value !== 'object') return value === null ? 'null' : typeof value;
  const keys = Object.keys(value).slice(0, 5);
  return keys.length === 0 ? 'an empty object' : `an object with keys ${keys.join(', ')}`;
}

/** An error's name and message, whole: sealed before it is cut. */
function uncut(error: unknown): string {
  try {
    return error instanceof Error ? `${String(error.name)}: ${String(error.message)}` : safeErrorText(error);
  } catch {
    return 'an unreadable error';
  }
}
