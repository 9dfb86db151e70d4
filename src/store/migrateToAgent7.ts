/**
 * agent/6 -> agent/7 (compensation). What agent/7 adds to a task that started before it:
 *
 * - policy: `compensateOn` at its default (every stop that did not meet the goal);
 * - `compensable`: empty. agent/6 did not record the writes a task made with the undo their tools derive, so a task
 *   migrated in flight undoes none of the writes it made before the upgrade, only those it makes after (said in the
 *   README's upgrade notes);
 * - `unwinding`: none (agent/6 had no compensation to be in the middle of);
 * - `away` (pause while the user is away): the user is present, and `awayTtlMs` at its default;
 * - tools per step: no tool recorded as having succeeded (an offer rule sees only what happens after the upgrade), and
 *   no offer recorded for the turn in flight (every tool the principal may use, as agent/6 offered).
 *
 * - plans: none proposed, and the policy's `planning` at its default (`off`: the model plans as it goes, as before).
 *
 * Outcomes keep what they said (they list no compensations).
 */
import { DEFAULT_POLICY } from '../defaults.js';

type Raw = Record<string, unknown>;

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The agent/7 context of an agent/6 one; anything it does not recognise is left for validation to refuse. */
export function toAgent7Context(context: Raw): Raw {
  return {
    ...context,
    policy: isObject(context.policy)
      ? { compensateOn: [...DEFAULT_POLICY.compensateOn], awayTtlMs: DEFAULT_POLICY.awayTtlMs, ...context.policy }
      : context.policy,
    compensable: context.compensable ?? [],
    succeeded: context.succeeded ?? [],
    offered: context.offered ?? null,
    away: context.away ?? null,
    unwinding: context.unwinding ?? null,
    plan: context.plan ?? null,
  };
}
