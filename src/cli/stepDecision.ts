/**
 * The step CLI's decisions on a pending confirmation, as the session sends them: through `orchestrator.confirm` and
 * `reject`, so the chart's own guards decide them exactly as for any other door. Its own module (step.ts runs its
 * command line on import) so that tests send the same requests through it in-process.
 */
import type { Principal } from '../../machines/context.js';
import type { Orchestrator, TaskStatus, UserEventResult } from '../orchestrator/orchestrator.js';
import { UsageError } from './runCli.js';

/**
 * The session a command runs under: the task's own (its user, with the scopes it started with), or `--as` someone
 * else of the task's tenant with the scopes `--scopes` gave (none by default).
 */
export function stepPrincipal(status: TaskStatus, as: string | undefined, scopes: readonly string[]): Principal {
  return as && as !== status.principal.userId
    ? { userId: as, tenantId: status.principal.tenantId, scopes: [...scopes] }
    : status.principal;
}

/**
 * `confirm [<confirmationId> [<argsHash>]]`: the pending confirmation, exactly the arguments shown, unless an id
 * (and a hash) is given; `reject [--id <confirmationId>] [reason]`. Null when there is nothing to name.
 */
export function sendStepDecision(
  orchestrator: Pick<Orchestrator, 'confirm' | 'reject'>,
  status: TaskStatus,
  principal: Principal,
  command: 'confirm' | 'reject',
  text: string,
): Promise<UserEventResult> {
  const pending = status.pendingConfirmation;
  const words = text.split(/\s+/).filter(Boolean);
  if (command === 'confirm') {
    if (words.length > 2) throw new UsageError('confirm takes at most a confirmation id and an arguments hash');
    const id = words[0] ?? pending?.id;
    const argsHash = words[1] ?? (words[0] === undefined || words[0] === pending?.id ? pending?.argsHash : undefined);
    if (!id || !argsHash)
      throw new UsageError('confirm needs the confirmation id and its arguments hash: confirm <id> <hash>');
    return orchestrator.confirm(status.taskId, principal, { id, argsHash });
  }
  const named = words[0] === '--id';
  if (named && !words[1]) throw new UsageError('reject --id needs a confirmation id');
  const id = named ? words[1] : pending?.id;
  if (!id) throw new UsageError('nothing is pending to reject: reject --id <confirmationId> [reason]');
  const reason = (named ? words.slice(2) : words).join(' ');
  return orchestrator.reject(status.taskId, principal, { id, ...(reason ? { reason } : {}) });
}
