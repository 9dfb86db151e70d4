/**
 * The re-check actor, right before a write runs: the principal as the host's session sees it now, then the tool's
 * business validation and resource permission on the exact arguments, then (last, so a refused call spends nothing)
 * one point of the tool's rate limit. Every verdict comes back as data; the chart's guards decide.
 */
import type { CheckVerdict, RecheckActorInput, RecheckActorOutput } from '../../../machines/actors.js';
import type { Principal } from '../../../machines/context.js';
import { errorName } from '../../../machines/lib/text.js';
import type { ActorHost } from '../actorHost.js';
import { type Cancel, runWithTimeout } from '../timeouts.js';
import { fromTask } from './taskLogic.js';
import { runCheck } from './checks.js';

const PASS: CheckVerdict = { ok: true };

export function recheckActor(host: ActorHost) {
  return fromTask<RecheckActorOutput, RecheckActorInput>(async ({ input, stop }) => {
    const started = host.clock.now();
    const tool = host.registry.get(input.call.tool);
    const session = await currentPrincipal(host, input.principal, stop);
    const principal = session.principal;
    // The hooks judge the principal as the session shows it now, not as it was at the task's start.
    const now = principal ? { ...input, principal } : input;
    const ask = (hook: 'validate' | 'authorize') =>
      tool?.[hook] ? runCheck(host, hook, now, stop) : Promise.resolve(PASS);
    const business = principal && !input.resend ? await ask('validate') : PASS;
    const permission = principal && business.ok ? await ask('authorize') : PASS;
    const rate =
      principal && business.ok && permission.ok && tool
        ? await host.rateLimits.consume(tool, input.principal.tenantId)
        : PASS;
    return {
      callId: input.call.callId,
      at: host.clock.now(),
      principal,
      sessionError: session.error,
      business,
      permission,
      rate,
      durationMs: Math.max(0, host.clock.now() - started),
    };
  });
}

/**
 * The task's principal as the host's session sees it now (its `refreshPrincipal`), or as it was at start when the
 * host gives none. null: the session is gone (the host said so). An error: the host could not say (a throw, a
 * timeout, an answer for another user or tenant); either way no write runs on it.
 */
async function currentPrincipal(
  host: ActorHost,
  principal: Principal,
  stop: Cancel,
): Promise<{ principal: Principal | null; error: string | null }> {
  if (!host.refreshPrincipal) return { principal, error: null };
  const refresh = host.refreshPrincipal;
  const timed = await runWithTimeout(host.clock, 5_000, stop, async () =>
    refresh({ ...principal, scopes: [...principal.scopes] }),
  ).catch((error: unknown) => ({ kind: 'error' as const, error }));
  if (timed.kind === 'timeout')
    return { principal: null, error: 'the host did not say within 5 s whether the session is still valid' };
  if (timed.kind !== 'done')
    return {
      principal: null,
      error: `the host could not say whether the session is still valid (${timed.kind === 'error' ? errorName(timed.error) : timed.kind})`,
    };
  const now = timed.value as Partial<Principal> | null;
  if (now === null) return { principal: null, error: null };
  if (!now || now.userId !== principal.userId || now.tenantId !== principal.tenantId || !Array.isArray(now.scopes)) {
    return { principal: null, error: 'the host answered with a session of another user or tenant' };
  }
  return {
    principal: {
      userId: principal.userId,
      tenantId: principal.tenantId,
      scopes: now.scopes.filter((s): s is string => typeof s === 'string'),
    },
    error: null,
  };
}
