/**
 * agent/7 -> agent/8 (the lean round). agent/8 judges a call's synchronous gates as one ordered list of named
 * guards of `vetting.judging`, where agent/7 had one state per gate: `vetting.choosing`, `checkingSchema`,
 * `checkingSubtask`, `checkingMandate` and `checkingPermission` are gone (`validating` and `authorizing`, the invoked
 * hooks, stay). The context is the same.
 *
 * A task stored in one of the removed states (they are passed through within one step, so a store holds one only if
 * a build saved mid-step) is placed in `vetting.judging`, with no current call: the call it was judging is judged
 * again from the first gate. That is safe: nothing of it has run, the gates before a hook are pure, and a call whose
 * arguments were already accepted is checked again on its validated arguments (which parse to themselves). Its audit
 * then shows the gates it passed twice, the second time under agent/8.
 */

type Raw = Record<string, unknown>;

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The states of agent/7's `vetting` that agent/8 no longer has. */
export const REMOVED_VETTING_STATES = [
  'choosing',
  'checkingSchema',
  'checkingSubtask',
  'checkingMandate',
  'checkingPermission',
] as const;

const isRemoved = (value: unknown): boolean =>
  isObject(value) &&
  Object.keys(value).length === 1 &&
  typeof value.vetting === 'string' &&
  (REMOVED_VETTING_STATES as readonly string[]).includes(value.vetting);

/** The agent/8 envelope of an agent/7 one; anything it does not recognise is left for validation to refuse. */
export function toAgent8(envelope: Raw): Raw {
  const snapshot = envelope.snapshot;
  if (!isObject(snapshot) || !isRemoved(snapshot.value)) return { ...envelope, machineVersion: 'agent/8' };
  const context = isObject(snapshot.context) ? snapshot.context : null;
  const batch = context && isObject(context.batch) ? context.batch : null;
  const summary = isObject(envelope.summary)
    ? { ...envelope.summary, stateValue: 'vetting.judging' }
    : envelope.summary;
  return {
    ...envelope,
    machineVersion: 'agent/8',
    summary,
    snapshot: {
      ...snapshot,
      value: { vetting: 'judging' },
      context: batch ? { ...context, batch: { ...batch, current: null } } : snapshot.context,
    },
  };
}
