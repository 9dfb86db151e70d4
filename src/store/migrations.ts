/**
 * Brings an envelope of an older machine version to the current one, on read, before it is validated. Each step is
 * explicit, only ever maps what changed, and leaves anything it does not recognise as it was (validation and the
 * restore checks then refuse it with their specific reason). A version with no step here is refused on read.
 *
 * - agent/1 -> agent/2: adds `writtenKeys` (writes that succeeded), empty: an agent/1 task has no record of them.
 * - agent/2 -> agent/3: call phases take the chart's state names (`running` becomes `reading`, `writing` or
 *   `reconciling`; the call awaiting confirmation becomes `awaitingConfirmation`) and the batch names its current
 *   call. Vetting became a state per gate: an agent/2 task that rested in `vetting` (its validation hooks were
 *   running) cannot be placed in one of them and is refused; nothing of its batch had run.
 */
import { UnsupportedVersionError } from '../errors.js';

export const MIGRATED_VERSIONS = ['agent/1', 'agent/2'] as const;

type Raw = Record<string, unknown>;

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

export function migrate(taskId: string, version: string, envelope: Raw): Raw {
  let current = envelope;
  if (version === 'agent/1') current = toAgent2(current);
  return toAgent3(taskId, current);
}

function withContext(envelope: Raw, change: (context: Raw, snapshot: Raw) => Raw, machineVersion: string): Raw {
  const snapshot = envelope.snapshot;
  if (!isObject(snapshot) || !isObject(snapshot.context)) return { ...envelope, machineVersion };
  return { ...envelope, machineVersion, snapshot: { ...snapshot, context: change(snapshot.context, snapshot) } };
}

function toAgent2(envelope: Raw): Raw {
  return withContext(envelope, (context) => ({ ...context, writtenKeys: context.writtenKeys ?? [] }), 'agent/2');
}

function toAgent3(taskId: string, envelope: Raw): Raw {
  const snapshot = isObject(envelope.snapshot) ? envelope.snapshot : {};
  if (snapshot.value === 'vetting') {
    throw new UnsupportedVersionError(
      taskId,
      'machine version "agent/2" rested in state "vetting" (its validation was running), which agent/3 splits into one state per gate; it cannot be migrated. No call of its batch had run',
    );
  }
  const value = snapshot.value;
  const executing = isObject(value) && typeof value.executing === 'string' ? value.executing : null;
  return withContext(
    envelope,
    (context) => {
      const batch = context.batch;
      if (!isObject(batch) || !Array.isArray(batch.calls)) return context;
      const pending = isObject(context.pendingConfirmation) ? context.pendingConfirmation.callId : null;
      let current: unknown = null;
      const calls = batch.calls.map((call) => {
        if (!isObject(call)) return call;
        if (call.phase === 'running' && (executing === 'writing' || executing === 'reconciling')) {
          current = call.callId;
          return { ...call, phase: executing };
        }
        if (call.phase === 'running' && executing === 'reading') return { ...call, phase: 'reading' };
        if (call.phase === 'ready' && executing === 'awaitingConfirmation' && call.callId === pending) {
          current = call.callId;
          return { ...call, phase: 'awaitingConfirmation' };
        }
        return call;
      });
      return { ...context, batch: { ...batch, calls, current } };
    },
    'agent/3',
  );
}
