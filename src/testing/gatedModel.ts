/**
 * A model wrapper whose every turn waits to be let through: the step CLI lets a human say `next` before the
 * model takes its turn, while tools, gates and persistence run as usual. The wrapped model decides as always
 * once released. A turn whose task is stopped or cancelled while it waits ends with the abort.
 */
import type { AgentModel, ModelReply, ModelRequest } from '../model/agentModel.js';

export interface GatedModel extends AgentModel {
  /** The request of the turn waiting to be released, or null. */
  readonly waiting: ModelRequest | null;
  /** Resolves with the waiting turn's request: at once if one waits, else when the next one starts waiting. */
  whenWaiting(): Promise<ModelRequest>;
  /** Lets the waiting turn run. False when no turn waits. */
  release(): boolean;
}

export function gatedModel(inner: AgentModel): GatedModel {
  let pending: { request: ModelRequest; go: () => void } | null = null;
  let watchers: ((request: ModelRequest) => void)[] = [];

  return {
    name: inner.name,
    ...(inner.reservation ? { reservation: inner.reservation } : {}),
    get waiting() {
      return pending?.request ?? null;
    },
    whenWaiting() {
      if (pending) return Promise.resolve(pending.request);
      return new Promise((resolve) => watchers.push(resolve));
    },
    release() {
      if (!pending) return false;
      const { go } = pending;
      pending = null;
      go();
      return true;
    },
    async decide(request: ModelRequest): Promise<ModelReply> {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          if (pending?.request === request) pending = null;
          reject(request.signal.reason);
        };
        if (request.signal.aborted) return onAbort();
        request.signal.addEventListener('abort', onAbort, { once: true });
        pending = {
          request,
          go: () => {
            request.signal.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        const notify = watchers;
        watchers = [];
        for (const watcher of notify) watcher(request);
      });
      return inner.decide(request);
    },
  };
}
