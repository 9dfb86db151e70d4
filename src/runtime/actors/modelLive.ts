/**
 * What live views see of a model turn while it is written (`orchestrator.watchModelText`, the `model_text` events):
 * the model actor's side of modelText.ts, per attempt.
 */
import type { CallTextDelta } from '../../model/agentModel.js';
import type { SealScope } from '../../privacy/privacy.js';
import type { ActorHost } from '../actorHost.js';
import { ARGUMENTS_BOUNDARY, textRelay } from '../modelText.js';
import { sealLiveArguments, sealLiveText } from '../sealing.js';

/**
 * The live text of one attempt of a turn, when the host listens for it (`orchestrator.watchModelText`, here or in
 * another process): the adapter's deltas held back to safe boundaries and redacted as the stored text will be (see
 * modelText.ts), and the tool calls being written, for the listeners that asked for them.
 */
export function liveText(host: ActorHost, taskId: string, turn: number, attempt: number, scope: SealScope) {
  const bus = host.modelText;
  if (!bus) return null;
  // Asked with the first piece (a model that does not stream costs nothing), so that the check for viewers in other
  // processes (one round trip) is answered by the first boundary.
  let asked = false;
  const ask = () => {
    if (asked) return;
    asked = true;
    bus.has(taskId);
  };
  // Both made with the first piece of their kind: a model that does not stream makes neither.
  let prose: ReturnType<typeof textRelay> | null = null;
  const textRelayOnce = () =>
    (prose ??= textRelay(
      (text) => sealLiveText(host.registry, scope, text),
      (text, replace) => bus.emit({ kind: 'text', taskId, turn, attempt, text, replace }),
      () => bus.has(taskId),
    ));
  let calls: Map<number, ReturnType<typeof callRelay>> | null = null;
  const callRelay = (index: number) => {
    const call = { callId: null as string | null, name: null as string | null };
    const redacted = (text: string | null) => (text === null ? null : host.registry.privacy.text(scope, text));
    return {
      call,
      relay: textRelay(
        (text) => sealLiveArguments(host.registry, scope, call.name, text),
        (text, replace) =>
          bus.emit({
            kind: 'call',
            taskId,
            turn,
            attempt,
            index,
            callId: redacted(call.callId),
            name: redacted(call.name),
            text,
            replace,
            proposed: true,
          }),
        () => bus.has(taskId, true),
        ARGUMENTS_BOUNDARY,
      ),
    };
  };
  /**
   * Set once the attempt is finished or discarded: an adapter that still writes (it ignored the abort of a timed-out
   * turn) shows nothing more, so nothing of a voided attempt comes after its `discarded`.
   */
  let over = false;
  return {
    /** Never throws into the adapter's stream: a view's trouble must not break the turn. */
    push: (delta: string) => {
      if (over) return;
      try {
        ask();
        textRelayOnce().push(delta);
      } catch {
        // Nothing shown; the reply is unaffected.
      }
    },
    call: (delta: CallTextDelta) => {
      if (over) return;
      try {
        ask();
        if (!Number.isSafeInteger(delta?.index) || delta.index < 0 || delta.index > 1_000) return;
        calls ??= new Map();
        let entry = calls.get(delta.index);
        if (!entry) calls.set(delta.index, (entry = callRelay(delta.index)));
        if (typeof delta.callId === 'string' && delta.callId !== '') entry.call.callId = delta.callId;
        if (typeof delta.name === 'string' && delta.name !== '') entry.call.name = delta.name;
        entry.relay.push(delta.arguments);
      } catch {
        // Nothing shown; the reply is unaffected.
      }
    },
    /** The turn is whole: the rest is shown. */
    finish: () => {
      if (over) return;
      over = true;
      try {
        prose?.finish();
        for (const entry of calls?.values() ?? []) entry.relay.finish();
      } catch {
        // Nothing more shown; the reply is unaffected.
      }
    },
    /** The attempt failed: whatever was shown of it is void. */
    discard: () => {
      if (over) return;
      over = true;
      if (prose?.sent || [...(calls?.values() ?? [])].some((entry) => entry.relay.sent))
        bus.emit({ kind: 'discarded', taskId, turn, attempt });
    },
  };
}
