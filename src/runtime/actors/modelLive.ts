/**
 * What live views see of a model turn while it is written (`orchestrator.watchModelText`, the `model_text` events):
 * the model actor's side of modelText.ts, per attempt.
 */
import type { CallTextDelta } from '../../model/agentModel.js';
import type { SealScope } from '../../privacy/privacy.js';
import type { ActorHost } from '../actorHost.js';
import { ARGUMENTS_BOUNDARY, type ModelTextBus, textRelay } from '../modelText.js';
import { sealLiveArguments, sealLiveText } from '../sealing.js';

/**
 * The live text of one attempt of a turn, when the host listens for it (`orchestrator.watchModelText`, here or in
 * another process): the adapter's deltas held back to safe boundaries and redacted as the stored text will be (see
 * modelText.ts), and the tool calls being written, for the listeners that asked for them.
 */
export function liveText(
  host: ActorHost,
  taskId: string,
  turn: number,
  attempt: number,
  scope: SealScope,
): LiveText | null {
  const bus = host.modelText;
  if (!bus) return null;
  return new LiveText(host, bus, taskId, turn, attempt, scope);
}

/**
 * One attempt's live text. A class rather than a dozen closures a turn: most turns of a task nobody watches and a
 * model that does not stream never call `push` or `call`, yet the host has a bus, so one is made every turn.
 */
class LiveText {
  /** Asked with the first piece (a model that does not stream costs nothing), so that the check for viewers in
   * other processes (one round trip) is answered by the first boundary. */
  private asked = false;
  /** Both made with the first piece of their kind: a model that does not stream makes neither. */
  private prose: ReturnType<typeof textRelay> | null = null;
  private calls: Map<number, ReturnType<LiveText['callRelay']>> | null = null;
  /**
   * Set once the attempt is finished or discarded: an adapter that still writes (it ignored the abort of a timed-out
   * turn) shows nothing more, so nothing of a voided attempt comes after its `discarded`.
   */
  private over = false;

  constructor(
    private readonly host: ActorHost,
    private readonly bus: ModelTextBus,
    private readonly taskId: string,
    private readonly turn: number,
    private readonly attempt: number,
    private readonly scope: SealScope,
  ) {}

  private ask(): void {
    if (this.asked) return;
    this.asked = true;
    this.bus.has(this.taskId);
  }

  private textRelayOnce() {
    const { host, bus, scope, taskId, turn, attempt } = this;
    return (this.prose ??= textRelay(
      (text) => sealLiveText(host.registry, scope, text),
      (text, replace) => bus.emit({ kind: 'text', taskId, turn, attempt, text, replace }),
      () => bus.has(taskId),
    ));
  }

  private callRelay(index: number) {
    const { host, bus, scope, taskId, turn, attempt } = this;
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
  }

  /** Never throws into the adapter's stream: a view's trouble must not break the turn. */
  readonly push = (delta: string): void => {
    if (this.over) return;
    try {
      this.ask();
      this.textRelayOnce().push(delta);
    } catch {
      // Nothing shown; the reply is unaffected.
    }
  };

  readonly call = (delta: CallTextDelta): void => {
    if (this.over) return;
    try {
      this.ask();
      if (!Number.isSafeInteger(delta?.index) || delta.index < 0 || delta.index > 1_000) return;
      const calls = (this.calls ??= new Map());
      let entry = calls.get(delta.index);
      if (!entry) calls.set(delta.index, (entry = this.callRelay(delta.index)));
      if (typeof delta.callId === 'string' && delta.callId !== '') entry.call.callId = delta.callId;
      if (typeof delta.name === 'string' && delta.name !== '') entry.call.name = delta.name;
      entry.relay.push(delta.arguments);
    } catch {
      // Nothing shown; the reply is unaffected.
    }
  };

  /** The turn is whole: the rest is shown. */
  finish(): void {
    if (this.over) return;
    this.over = true;
    try {
      this.prose?.finish();
      if (this.calls) for (const entry of this.calls.values()) entry.relay.finish();
    } catch {
      // Nothing more shown; the reply is unaffected.
    }
  }

  /** The attempt failed: whatever was shown of it is void. */
  discard(): void {
    if (this.over) return;
    this.over = true;
    if (this.prose?.sent || [...(this.calls?.values() ?? [])].some((entry) => entry.relay.sent))
      this.bus.emit({ kind: 'discarded', taskId: this.taskId, turn: this.turn, attempt: this.attempt });
  }
}
