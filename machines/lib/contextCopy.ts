/**
 * A copy of the agent's context with a patch over it: what `{ ...context, ...patch }` and XState's `assign`
 * (`Object.assign({}, context, patch)`) make, same keys in the same order, with a tenth of the garbage.
 *
 * Why: the context has forty-odd keys and a read round copies it about ten times. `Object.assign` onto `{}` adds
 * the keys one by one, regrowing the new object's property store (and turns it into a dictionary past a dozen); a
 * spread clones the source at its final size only while its site has seen at most four shapes of context, and the
 * contexts a task goes through have more (a field that held null holds an object, a number becomes a fraction...),
 * so in practice it takes the same slow path: about 2.5 KB of garbage a copy. An object literal naming every key is
 * allocated once, at its final size, whatever shape the source has.
 *
 * The literal holds the keys in the schema's order, which is the order of every context the chart makes and of every
 * context read back (the envelope's zod parse); a context whose keys come in another order (or with others) is
 * copied by a spread instead, so the copy always has the source's keys in the source's order, as before.
 */
import { type AgentContext, agentContextSchema } from '../context.js';

const KEYS: readonly string[] = Object.keys(agentContextSchema.shape);

/** The context's own keys are the schema's, in the schema's order. Allocates nothing (a for-in uses the shape's cache). */
function inSchemaOrder(context: AgentContext): boolean {
  let at = 0;
  for (const key in context) if (key !== KEYS[at++]) return false;
  return at === KEYS.length;
}

/** Every key, in the schema's order (the type checker says if one is missing or unknown). */
const literalCopy = (c: AgentContext): AgentContext => ({
  taskId: c.taskId,
  goal: c.goal,
  principal: c.principal,
  mandate: c.mandate,
  catalog: c.catalog,
  policy: c.policy,
  provenance: c.provenance,
  budget: c.budget,
  modelReservation: c.modelReservation,
  success: c.success,
  startedAt: c.startedAt,
  turn: c.turn,
  batch: c.batch,
  pendingConfirmation: c.pendingConfirmation,
  question: c.question,
  questionExpiresAt: c.questionExpiresAt,
  review: c.review,
  outage: c.outage,
  waitingSince: c.waitingSince,
  evidence: c.evidence,
  knowledge: c.knowledge,
  seenObservations: c.seenObservations,
  proposedSinceNew: c.proposedSinceNew,
  writtenKeys: c.writtenKeys,
  denied: c.denied,
  unverified: c.unverified,
  exposure: c.exposure,
  observedIds: c.observedIds,
  rejectedTurns: c.rejectedTurns,
  invalidOutputs: c.invalidOutputs,
  lastFailure: c.lastFailure,
  cancelRequested: c.cancelRequested,
  succeeded: c.succeeded,
  offered: c.offered,
  compensable: c.compensable,
  away: c.away,
  unwinding: c.unwinding,
  plan: c.plan,
  workflow: c.workflow,
  tools: c.tools,
  parent: c.parent,
  subtasks: c.subtasks,
  forkedFrom: c.forkedFrom,
  compaction: c.compaction,
  outcome: c.outcome,
});

/** `{ ...context, ...patch }`: the same keys, order and values (the patch's own enumerable keys win), less garbage. */
export function patchedContext(context: AgentContext, patch?: Partial<AgentContext>): AgentContext {
  if (!inSchemaOrder(context)) return { ...context, ...patch };
  const copy = literalCopy(context);
  if (patch) {
    const target = copy as unknown as Record<string, unknown>;
    const source = patch as Record<string, unknown>;
    for (const key in source) {
      if (!Object.hasOwn(source, key)) continue;
      // A key the context does not have (none of the chart's patches has one) would go last: the spread does that.
      if (!Object.hasOwn(target, key)) return { ...context, ...patch };
      target[key] = source[key];
    }
  }
  return copy;
}
