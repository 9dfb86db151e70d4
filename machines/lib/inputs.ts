/** The inputs of the chart's invoked actors, read off the context (they are persisted with the snapshot). */
import type {
  CheckActorInput,
  LookupActorInput,
  ModelActorInput,
  ReadsActorInput,
  RecheckActorInput,
  SummariseActorInput,
  WriteActorInput,
} from '../actors.js';
import type { AgentContext, CallState, Observation } from '../context.js';
import { currentCall } from './batch.js';

type Args = { context: AgentContext };

/** The retries left (`remaining(budget).retries`, never below zero), without the counters' object. */
function retryAllowance(context: AgentContext): number {
  return Math.max(0, context.budget.limits.retries - context.budget.used.retries);
}

/** The batch's observations so far, in call order (a plain loop: every model turn asks). */
function observationsOf(calls: readonly CallState[] | undefined): Observation[] {
  const out: Observation[] = [];
  if (calls) for (const c of calls) if (c.observation) out.push(c.observation);
  return out;
}

/** The calls being read, as the reads actor runs them (a plain loop: every read round asks). */
function readingCalls(calls: readonly CallState[] | undefined): ReadsActorInput['calls'] {
  const out: ReadsActorInput['calls'] = [];
  if (calls)
    for (const c of calls) if (c.phase === 'reading') out.push({ callId: c.callId, tool: c.tool, args: c.args });
  return out;
}

/** The call a single-call invoked state works on, as its actor runs it. */
function callRef(context: AgentContext) {
  const call = currentCall(context.batch);
  if (!call) throw new Error('no current call');
  return { callId: call.callId, tool: call.tool, args: call.args };
}

export const modelInput = ({ context }: Args): ModelActorInput => ({
  taskId: context.taskId,
  turn: context.turn,
  observations: observationsOf(context.batch?.calls),
  retryAllowance: retryAllowance(context),
});

export const checkInput = ({ context }: Args): CheckActorInput => ({
  taskId: context.taskId,
  principal: context.principal,
  call: callRef(context),
});

export const recheckInput = ({ context }: Args): RecheckActorInput => ({ ...checkInput({ context }), resend: false });

export const resendInput = ({ context }: Args): RecheckActorInput => ({ ...checkInput({ context }), resend: true });

export const readsInput = ({ context }: Args): ReadsActorInput => ({
  taskId: context.taskId,
  principal: context.principal,
  calls: readingCalls(context.batch?.calls),
  retryAllowance: retryAllowance(context),
});

export const writeInput = ({ context }: Args): WriteActorInput => {
  const call = currentCall(context.batch);
  if (!call || !call.idempotencyKey || !call.argsHash) throw new Error('no write is in flight');
  return {
    taskId: context.taskId,
    // The session as the re-check right before the write saw it (scopes revoked since the start are gone).
    principal: call.runAs ?? context.principal,
    call: callRef(context),
    argsHash: call.argsHash,
    idempotencyKey: call.idempotencyKey,
    attempt: call.writeAttempts,
  };
};

export const lookupInput = (args: Args): LookupActorInput => ({
  ...writeInput(args),
  attempt: currentCall(args.context.batch)!.lookups,
});

export const summariseInput = ({ context }: Args): SummariseActorInput => ({
  taskId: context.taskId,
  turn: context.turn,
  reason: context.compaction.requested ? 'context_too_long' : 'near_limit',
  mayAskModel: context.compaction.reserved !== null,
});
