/**
 * The invoked actors of the agent machine, bound to real tools and a real model. They never throw for expected
 * failures: every outcome comes back as data the machine's guards route on.
 *
 * Restart rule: XState re-runs the invocations of a restored snapshot. Reads, vetting and lookups are safe to run
 * again; a write is not, so a write executor started during a restore reports "interrupted" and the machine
 * reconciles by idempotency key instead of executing a second time.
 */
import { fromPromise } from 'xstate';
import type { z } from 'zod';
import type {
  CallOutcome,
  CallRef,
  GateDecision,
  LookupActorInput,
  LookupActorOutput,
  ModelActorInput,
  ModelActorOutput,
  ReadResult,
  ReadsActorInput,
  ReadsActorOutput,
  Verdict,
  VetActorInput,
  VetActorOutput,
  WriteActorInput,
  WriteActorOutput,
} from '../../machines/actorContracts.js';
import { type ModelEvent, modelEventSchema } from '../../machines/agentEvents.js';
import type { Json, Principal } from '../../machines/agentTypes.js';
import { backoffDelay, sleep } from '../clock.js';
import { canonicalJson } from '../json/canonicalJson.js';
import { deriveIdempotencyKey, hashArguments } from '../json/hashing.js';
import { type ModelReply, TransientModelError } from '../model/agentModel.js';
import { type ReadTool, type Tool, type ToolResult, TransientToolError, type WriteTool } from '../tool.js';
import type { ActorHost } from './actorHost.js';
import { runWithTimeout } from './timeouts.js';
import { hasScopes } from './toolRegistry.js';

const SUMMARY_LIMIT = 300;

export function createRuntimeActors(host: ActorHost) {
  const { clock } = host;
  const elapsed = (start: number) => Math.max(0, clock.now() - start);

  return {
    model: fromPromise<ModelActorOutput, ModelActorInput>(async ({ input, signal }) => {
      const task = host.task(input.taskId);
      // The turn is paid for only once the state that debits it is durable. Waiting here also yields to the event
      // loop between turns, so a task whose tools and model answer at once cannot starve other work.
      await task.barrier();
      const context = task.context();
      let retriesUsed = 0;
      for (;;) {
        const timed = await runWithTimeout(clock, host.modelTimeoutMs, signal, (s) =>
          host.model
            .decide({
              taskId: input.taskId,
              turn: input.turn,
              goal: context.goal,
              principal: { userId: context.principal.userId, tenantId: context.principal.tenantId },
              tools: host.registry.offeredTo(context.principal),
              observations: input.observations,
              transcript: () => task.transcript(),
              signal: s,
            })
            .then(
              (reply) => ({ ok: true as const, reply }),
              (error: unknown) => ({ ok: false as const, error }),
            ),
        );
        if (timed.kind === 'aborted') throw new Error('the model call was aborted');
        const failure =
          timed.kind === 'timeout'
            ? { transient: true, message: `no answer within ${host.modelTimeoutMs} ms`, retryAfterMs: undefined }
            : timed.value.ok
              ? null
              : {
                  transient: timed.value.error instanceof TransientModelError,
                  message: safeText(timed.value.error),
                  retryAfterMs: (timed.value.error as TransientModelError).retryAfterMs,
                };
        if (!failure && timed.kind === 'done' && timed.value.ok) {
          return { ...toModelEvent(timed.value.reply, clock.now(), context.modelReservation), retriesUsed };
        }
        if (!failure!.transient || retriesUsed >= input.retryAllowance) {
          const error = new Error(
            failure!.transient ? `${failure!.message} (after ${retriesUsed} retries)` : failure!.message,
          );
          // The retries were spent even though the turn failed: the machine debits them from the budget.
          throw Object.assign(error, { retriesUsed });
        }
        const delay = Math.max(failure!.retryAfterMs ?? 0, backoffDelay(retriesUsed, host.backoff, host.random));
        retriesUsed += 1;
        await sleep(clock, delay, signal);
      }
    }),

    vetCalls: fromPromise<VetActorOutput, VetActorInput>(async ({ input, signal }) => {
      const verdicts = await Promise.all(input.calls.map((call) => vet(host, input.taskId, input.principal, call, signal)));
      return { at: clock.now(), verdicts };
    }),

    executeReads: fromPromise<ReadsActorOutput, ReadsActorInput>(async ({ input, signal }) => {
      const allowance = { left: input.retryAllowance };
      const results = await Promise.all(
        input.calls.map((call) => runRead(host, input.taskId, input.principal, call, allowance, signal)),
      );
      return { at: clock.now(), results, retriesUsed: input.retryAllowance - allowance.left };
    }),

    executeWrite: fromPromise<WriteActorOutput, WriteActorInput>(async ({ input, signal }) => {
      const task = host.task(input.taskId);
      // Captured synchronously: true only when this invocation is XState re-running a restored one.
      const rerun = task.restoring;
      const started = clock.now();
      if (rerun) {
        return {
          at: clock.now(),
          durationMs: 0,
          outcome: {
            kind: 'unknown',
            code: 'interrupted',
            summary: 'the process stopped while this write was in flight; its outcome must be looked up',
          },
        };
      }
      // The snapshot holding this write's intent (idempotency key, args hash) must be durable first.
      await task.barrier();
      // A cancel that arrived meanwhile wins: this is the last moment before the side effect.
      if (task.context().cancelRequested) {
        return {
          at: clock.now(),
          durationMs: 0,
          outcome: { kind: 'error', code: 'cancelled', summary: 'not sent: the task was cancelled before the write started', retryable: false },
        };
      }
      const outcome = await runWrite(host, input, signal);
      return { at: clock.now(), outcome, durationMs: elapsed(started) };
    }),

    lookupWrite: fromPromise<LookupActorOutput, LookupActorInput>(async ({ input, signal }) => {
      const started = clock.now();
      const tool = host.registry.get(input.call.tool);
      if (tool?.effect !== 'write') {
        return { at: clock.now(), durationMs: 0, result: { kind: 'inconclusive', code: 'unknown_tool', summary: `no write tool ${input.call.tool}` } };
      }
      if (input.attempt > 1) {
        await sleep(clock, backoffDelay(input.attempt - 2, tool.lookupRetry ?? host.backoff, host.random), signal);
      }
      const timed = await runWithTimeout(clock, tool.timeoutMs, signal, (s) =>
        tool.lookup(input.idempotencyKey, { taskId: input.taskId, principal: input.principal, signal: s }),
      ).catch((error: unknown) => ({ kind: 'error' as const, error }));
      const durationMs = elapsed(started);
      if (timed.kind === 'done') {
        if (!timed.value.found) return { at: clock.now(), durationMs, result: { kind: 'not_found' } };
        const parsed = tool.output.safeParse(timed.value.value);
        if (parsed.success) return { at: clock.now(), durationMs, result: { kind: 'found', value: toJson(parsed.data) } };
        return {
          at: clock.now(),
          durationMs,
          result: { kind: 'inconclusive', code: 'invalid_output', summary: `lookup returned data that does not match the output schema: ${zodSummary(parsed.error)}` },
        };
      }
      const summary =
        timed.kind === 'timeout'
          ? `lookup did not answer within ${tool.timeoutMs} ms`
          : timed.kind === 'aborted'
            ? 'lookup aborted'
            : `lookup failed: ${safeText(timed.error)}`;
      return { at: clock.now(), durationMs, result: { kind: 'inconclusive', code: timed.kind === 'timeout' ? 'timeout' : 'lookup_failed', summary } };
    }),
  };
}

export type RuntimeActors = ReturnType<typeof createRuntimeActors>;

// --- vetting ----------------------------------------------------------------------------------------------

async function vet(host: ActorHost, taskId: string, principal: Principal, call: CallRef, signal: AbortSignal): Promise<Verdict> {
  const tool = host.registry.get(call.tool);
  const base = (args: Json, gates: GateDecision[]): Verdict => ({
    callId: call.callId,
    args,
    argsHash: hashArguments(args),
    redactedArgs: args,
    idempotencyKey: null,
    gates,
    needsConfirmation: false,
    confirmationSummary: null,
  });
  if (!tool) {
    return base(call.args, [{ gate: 'schema', ok: false, code: 'unknown_tool', summary: `no tool named ${call.tool} is installed` }]);
  }
  const parsed = tool.input.safeParse(call.args);
  if (!parsed.success) {
    return base(call.args, [{ gate: 'schema', ok: false, code: 'invalid_arguments', summary: zodSummary(parsed.error) }]);
  }
  let args: Json;
  try {
    args = toJson(parsed.data);
  } catch (error) {
    return base(call.args, [{ gate: 'schema', ok: false, code: 'invalid_arguments', summary: safeText(error) }]);
  }
  // The executors parse these validated arguments again before running them. A schema whose output does not parse
  // to itself (a non-idempotent transform) would run other arguments than the ones hashed, confirmed and keyed.
  if (!parsesToItself(tool, args)) {
    return base(call.args, [
      { gate: 'schema', ok: false, code: 'invalid_arguments', summary: `the validated arguments of ${tool.name} do not validate to themselves; the tool's input schema transforms them` },
    ]);
  }
  const argsHash = hashArguments(args);
  const verdict: Verdict = {
    ...base(args, [{ gate: 'schema', ok: true, code: null, summary: 'arguments match the input schema' }]),
    argsHash,
    redactedArgs: tool.redact ? safeRedact(tool, parsed.data) : args,
    idempotencyKey: tool.effect === 'write' ? deriveIdempotencyKey(taskId, tool.name, argsHash) : null,
  };
  const ctx = { taskId, principal, signal };

  const business = await runHook(host, tool, 'business validation', () => tool.validate?.(parsed.data, ctx) ?? { ok: true }, signal);
  verdict.gates.push({
    gate: 'business',
    ok: business.ok,
    code: business.ok ? null : (business.code ?? 'invalid_arguments'),
    summary: business.ok ? 'business rules hold' : business.summary,
  });
  if (!business.ok) return verdict;

  const missing = tool.scopes.filter((scope) => !principal.scopes.includes(scope));
  const permission: HookResult = hasScopes(principal, tool.scopes)
    ? await runHook(host, tool, 'authorization', () => tool.authorize?.(parsed.data, ctx) ?? { ok: true }, signal)
    : { ok: false, summary: `the session of ${principal.userId} lacks scope ${missing.join(', ')}` };
  verdict.gates.push({
    gate: 'permission',
    ok: permission.ok,
    code: permission.ok ? null : permission.code === 'unavailable' ? 'unavailable' : 'permission_denied',
    summary: permission.ok ? `${principal.userId} may use ${tool.name} with these arguments` : permission.summary,
  });
  if (!permission.ok) return verdict;

  try {
    const rule: unknown = tool.confirm ?? 'never';
    let decided: unknown = rule !== 'never';
    if (typeof rule === 'function') {
      const timed = await runWithTimeout(host.clock, tool.timeoutMs, signal, async () => rule(parsed.data, principal));
      decided = timed.kind === 'done' ? timed.value : true;
    }
    // Only a plain `false` skips the confirmation: a promise, a truthy non-boolean or an unknown rule ('Always')
    // must fail closed, never be read as "no confirmation needed" downstream.
    verdict.needsConfirmation = decided !== false;
    if (verdict.needsConfirmation) {
      verdict.confirmationSummary = tool.describeConfirmation?.(parsed.data) ?? `${tool.name} ${canonicalJson(verdict.redactedArgs)}`;
    }
  } catch (error) {
    // A broken confirmation rule must fail closed: ask.
    verdict.needsConfirmation = true;
    verdict.confirmationSummary = `${tool.name} (confirmation rule failed: ${safeText(error)})`;
  }
  return verdict;
}

function parsesToItself(tool: Tool, args: Json): boolean {
  const again = tool.input.safeParse(args);
  if (!again.success) return false;
  try {
    return canonicalJson(toJson(again.data)) === canonicalJson(args);
  } catch {
    return false;
  }
}

type HookResult = { ok: true } | { ok: false; code?: string; summary: string };

async function runHook(
  host: ActorHost,
  tool: Tool,
  what: string,
  hook: () => HookResult | Promise<HookResult>,
  signal: AbortSignal,
): Promise<HookResult> {
  const timed = await runWithTimeout(host.clock, tool.timeoutMs, signal, async () => hook()).catch(
    (error: unknown) => ({ kind: 'error' as const, error }),
  );
  if (timed.kind === 'done') {
    const result = timed.value as Partial<{ ok: unknown; code: unknown; summary: unknown }> | null | undefined;
    // Only `ok: true` passes a gate; anything else (a truthy non-boolean, no result at all) rejects.
    if (result?.ok === true) return { ok: true };
    return {
      ok: false,
      code: typeof result?.code === 'string' ? result.code : undefined,
      summary: typeof result?.summary === 'string' ? cap(result.summary) : `${what} did not return { ok: true }`,
    };
  }
  if (timed.kind === 'timeout') return { ok: false, code: 'unavailable', summary: `${what} did not finish within ${tool.timeoutMs} ms` };
  if (timed.kind === 'aborted') return { ok: false, code: 'unavailable', summary: `${what} was aborted` };
  // Only the error's name reaches the model: a hook's message may name internal hosts or data.
  return { ok: false, code: 'unavailable', summary: `${what} failed (${errorName(timed.error)})` };
}

function safeRedact(tool: Tool, args: unknown): Json {
  try {
    return toJson(tool.redact!(args));
  } catch {
    return '[redaction failed]';
  }
}

// --- reads ------------------------------------------------------------------------------------------------

async function runRead(
  host: ActorHost,
  taskId: string,
  principal: Principal,
  call: CallRef,
  allowance: { left: number },
  signal: AbortSignal,
): Promise<ReadResult> {
  const started = host.clock.now();
  const tool = host.registry.get(call.tool) as ReadTool | undefined;
  const finish = (outcome: CallOutcome, attempts: number): ReadResult => ({
    callId: call.callId,
    outcome,
    attempts,
    durationMs: Math.max(0, host.clock.now() - started),
  });
  if (!tool || tool.effect !== 'read') {
    return finish({ kind: 'error', code: 'unknown_tool', summary: `no read tool named ${call.tool}`, retryable: false }, 0);
  }
  const parsed = tool.input.safeParse(call.args);
  if (!parsed.success) {
    return finish({ kind: 'error', code: 'invalid_arguments', summary: zodSummary(parsed.error), retryable: true }, 0);
  }
  const maxAttempts = tool.retry?.maxAttempts ?? 1;
  for (let attempt = 1; ; attempt++) {
    const outcome = await attemptTool(host, tool, tool.timeoutMs, signal, (s) =>
      tool.execute(parsed.data, { taskId, callId: call.callId, principal, signal: s, attempt }),
    );
    const transient = outcome.kind === 'error' && outcome.retryable;
    if (!transient || attempt >= maxAttempts || allowance.left <= 0 || signal.aborted) {
      if (outcome.kind === 'error' && outcome.code === 'timeout') {
        return finish(
          {
            ...outcome,
            summary: `${tool.name} did not answer within ${tool.timeoutMs} ms (${attempt} attempt${attempt > 1 ? 's' : ''}); the result is unknown, not empty`,
          },
          attempt,
        );
      }
      return finish(outcome, attempt);
    }
    allowance.left -= 1;
    const delay = backoffDelay(attempt - 1, tool.retry!, host.random);
    try {
      await sleep(host.clock, delay, signal);
    } catch {
      return finish(outcome, attempt);
    }
  }
}

/** One attempt of a tool call: timeout, thrown errors and output validation turned into a CallOutcome. */
async function attemptTool<O>(
  host: ActorHost,
  tool: Tool<unknown, O>,
  timeoutMs: number,
  signal: AbortSignal,
  work: (signal: AbortSignal) => Promise<ToolResult<O>>,
): Promise<CallOutcome> {
  let timed;
  try {
    timed = await runWithTimeout(host.clock, timeoutMs, signal, work);
  } catch (error) {
    if (error instanceof TransientToolError) {
      return { kind: 'error', code: 'unavailable', summary: `${tool.name} is unavailable: ${cap(error.message)}`, retryable: true };
    }
    return { kind: 'error', code: 'tool_error', summary: `${tool.name} failed unexpectedly (${errorName(error)})`, retryable: false };
  }
  if (timed.kind === 'timeout') return { kind: 'error', code: 'timeout', summary: `${tool.name} timed out`, retryable: true };
  if (timed.kind === 'aborted') return { kind: 'error', code: 'aborted', summary: `${tool.name} was aborted`, retryable: false };
  const result = timed.value;
  if (!result.ok) {
    return { kind: 'error', code: result.code, summary: cap(result.summary), retryable: result.retryable ?? false };
  }
  const parsed = tool.output.safeParse(result.value);
  if (!parsed.success) {
    return { kind: 'error', code: 'invalid_output', summary: `${tool.name} returned output that does not match its schema: ${zodSummary(parsed.error)}`, retryable: false };
  }
  try {
    return { kind: 'ok', value: toJson(parsed.data) };
  } catch (error) {
    return { kind: 'error', code: 'invalid_output', summary: `${tool.name} returned non-JSON output (${safeText(error)})`, retryable: false };
  }
}

// --- writes -----------------------------------------------------------------------------------------------

async function runWrite(host: ActorHost, input: WriteActorInput, signal: AbortSignal): Promise<CallOutcome> {
  const tool = host.registry.get(input.call.tool) as WriteTool | undefined;
  if (!tool || tool.effect !== 'write') {
    return { kind: 'error', code: 'unknown_tool', summary: `no write tool named ${input.call.tool}`, retryable: false };
  }
  const parsed = tool.input.safeParse(input.call.args);
  if (!parsed.success) {
    return { kind: 'error', code: 'invalid_arguments', summary: zodSummary(parsed.error), retryable: false };
  }
  const outcome = await attemptTool(host, tool, tool.timeoutMs, signal, (s) =>
    tool.execute(parsed.data, {
      taskId: input.taskId,
      callId: input.call.callId,
      principal: input.principal,
      signal: s,
      attempt: input.attempt,
      idempotencyKey: input.idempotencyKey,
    }),
  );
  if (outcome.kind !== 'error') return outcome;
  switch (outcome.code) {
    // The request may have reached the service: the effect may exist. Look it up; never re-run blindly.
    case 'timeout':
      return { kind: 'unknown', code: 'timeout', summary: `${tool.name} did not answer within ${tool.timeoutMs} ms; it may have been applied` };
    case 'tool_error':
    case 'unavailable':
    case 'invalid_output':
    case 'aborted':
      return { kind: 'unknown', code: outcome.code, summary: `${outcome.summary}; it may have been applied` };
    default:
      // A result the service returned itself (conflict, not_found...): a business outcome, reported to the model.
      return outcome;
  }
}

// --- model ------------------------------------------------------------------------------------------------

/**
 * Turns an adapter's reply into a validated `model.*` event; anything malformed becomes `model.invalidOutput`.
 * Usage that is not a finite number (NaN, Infinity, a string) is charged as the turn's whole `reservation`: it would
 * otherwise disable the token and cost budgets (NaN compares false) and be persisted as null.
 */
export function toModelEvent(
  reply: ModelReply,
  at: number,
  reservation: { tokens: number; costMicros: number } = { tokens: 0, costMicros: 0 },
): ModelEvent {
  const reported = [reply?.usage?.inputTokens, reply?.usage?.outputTokens, reply?.usage?.costMicros];
  const unusable = reported.some((n) => n !== undefined && (typeof n !== 'number' || !Number.isFinite(n)));
  const count = (n: number | undefined) => Math.max(0, Math.round(n ?? 0));
  const usage = unusable
    ? { inputTokens: reservation.tokens, outputTokens: 0, costMicros: reservation.costMicros }
    : { inputTokens: count(reported[0]), outputTokens: count(reported[1]), costMicros: count(reported[2]) };
  let candidate: unknown;
  switch (reply?.type) {
    case 'tool_calls':
      candidate = {
        type: 'model.toolsProposed',
        at,
        text: reply.text ?? null,
        usage,
        calls: (reply.calls ?? []).map((c) => (c.callId === undefined ? { name: c.name, arguments: c.arguments } : { callId: c.callId, name: c.name, arguments: c.arguments })),
      };
      break;
    case 'answer':
      candidate = { type: 'model.answered', at, text: reply.text, usage };
      break;
    case 'ask_user':
      candidate = { type: 'model.askedUser', at, question: reply.question, usage };
      break;
    case 'refusal':
      candidate = { type: 'model.refused', at, reason: reply.reason, usage };
      break;
    case 'invalid':
      candidate = { type: 'model.invalidOutput', at, detail: cap(reply.detail), usage };
      break;
    default:
      return { type: 'model.invalidOutput', at, detail: 'the model adapter returned an unknown reply type', usage };
  }
  const parsed = modelEventSchema.safeParse(candidate);
  if (parsed.success) return parsed.data;
  return { type: 'model.invalidOutput', at, detail: `unusable model output: ${zodSummary(parsed.error)}`, usage };
}

// --- helpers ----------------------------------------------------------------------------------------------

/** Round-trips through canonical JSON: rejects non-JSON values, drops prototypes. */
function toJson(value: unknown): Json {
  return JSON.parse(canonicalJson(value)) as Json;
}

/** A zod error as one short line: "room_id: Invalid input: expected string; end_at: ...". */
export function zodSummary(error: z.ZodError): string {
  return cap(
    error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`)
      .join('; '),
  );
}

function cap(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > SUMMARY_LIMIT ? `${line.slice(0, SUMMARY_LIMIT)}…` : line;
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** An error's name and first line, capped: no stack traces, no nested causes. */
function safeText(error: unknown): string {
  if (error instanceof Error) return cap(`${error.name}: ${error.message.split('\n')[0]}`);
  return cap(String(error));
}
