/**
 * Stepping for the service: the step CLI's gated model (`gatedModel`, one model turn per `next`), one gate per
 * task, so that several tasks stepped from their live pages do not let each other's turns through.
 *
 * @example
 * const stepper = createStepper(myModel);
 * const orchestrator = createOrchestrator({ tools, model: stepper.model, store });
 * await app.register(agentService, { orchestrator, authenticate, stepper });
 */
import type { AgentModel, ModelRequest } from '../model/agentModel.js';
import { type GatedModel, gatedModel } from '../testing/gatedModel.js';

export interface Stepper {
  /** Give this to the orchestrator: every model turn waits for `release(taskId)`. */
  readonly model: AgentModel;
  /** The waiting turn's request of this task, or null. */
  waiting(taskId: string): ModelRequest | null;
  /** Resolves when this task's next turn waits (at once if one does). */
  whenWaiting(taskId: string): Promise<ModelRequest>;
  /** Lets this task's waiting turn run; false when none waits. */
  release(taskId: string): boolean;
}

export function createStepper(inner: AgentModel): Stepper {
  const gates = new Map<string, GatedModel>();
  const gate = (taskId: string) => {
    let found = gates.get(taskId);
    if (!found) {
      found = gatedModel(inner);
      gates.set(taskId, found);
    }
    return found;
  };
  return {
    model: {
      name: inner.name,
      ...(inner.reservation ? { reservation: inner.reservation } : {}),
      decide: (request) => gate(request.taskId).decide(request),
    },
    waiting: (taskId) => gates.get(taskId)?.waiting ?? null,
    whenWaiting: (taskId) => gate(taskId).whenWaiting(),
    release: (taskId) => gates.get(taskId)?.release() ?? false,
  };
}
