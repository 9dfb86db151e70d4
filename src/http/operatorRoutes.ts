/**
 * The operator's routes: a task's full history (its model turns with their messages and tool outputs, redacted as
 * the journals store them, its calls still pending or of unknown outcome, and its audit), and the actions only an
 * operator of the task's tenant takes: resolve a review (`orchestrator.resolveReview`) and erase the task
 * (`orchestrator.erase`). Cancel is the decision route every user has (`decisions.ts`).
 *
 * An operator holds the orchestrator's `adminScope` in the task's tenant. Anyone else who may see the task (its user,
 * an approver) gets 403 `operator_only`; a caller who may not see it, 404 as for a task that does not exist. Every
 * action checks CSRF as the decisions do, and is recorded with who took it: a resolution in the task's audit (the
 * chart records the reviewer), an erasure in the tombstone that outlives the task (`by`).
 *
 * A task waiting out a model outage retries by itself at its `outage.wakeAt` (the expiry sweep); an operator may ask
 * the model again sooner (`orchestrator.retryModelNow`), which the chart charges as one more model turn and records
 * with who asked. An operator may also fork a task from a step into a new one run for them (`orchestrator.fork`),
 * where a copy cannot authorise a write.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { ForkNotAllowedError, type TaskStatus } from '../orchestrator/orchestrator.js';
import { taskStatusSchema } from '../orchestrator/statusSchema.js';
import { actingOn } from './acting.js';
import { type ServiceContext, parse } from './context.js';
import type { RouteDoc } from './openapi.js';
import { route } from './routes.js';
import {
  decisionResultSchema,
  eraseBodySchema,
  forkBodySchema,
  historySchema,
  retryModelBodySchema,
  reviewBodySchema,
  taskParamsSchema,
  tombstoneSchema,
} from './schemas.js';
import { answered, serviceError } from './serviceError.js';

export function registerOperatorRoutes(app: FastifyInstance, ctx: ServiceContext, docs: RouteDoc[]): void {
  const { orchestrator } = ctx;
  const isOperator = (principal: Principal) =>
    orchestrator.adminScope !== null && principal.scopes.includes(orchestrator.adminScope);

  /** The operator and the task they act on; 404 to a caller who may not see it, 403 to one who may but is no operator. */
  const prepare = async <S extends z.ZodType>(request: FastifyRequest, schema: S) => {
    const { principal, taskId, body } = await actingOn(ctx, request, schema);
    if (!isOperator(principal))
      throw serviceError(403, 'operator_only', `only an operator (${orchestrator.adminScope ?? 'none set'}) may`);
    return { principal, taskId, body };
  };

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getTaskHistory',
      url: '/api/tasks/:taskId/history',
      summary:
        "The task's full history for its user or an operator: model turns with their messages and tool outputs (redacted as stored), pending and unknown calls, the audit",
      params: taskParamsSchema,
      response: historySchema,
      errors: { 403: ['operator_only'], 404: ['task_not_found'] },
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const { taskId } = parse(taskParamsSchema, request.params, 'params');
      const { status, access } = await ctx.visible(principal, taskId);
      if (access !== 'owner' && !isOperator(principal))
        throw serviceError(403, 'operator_only', "a task's history is its user's or an operator's");
      const [transcript, audit] = await Promise.all([
        orchestrator.transcript(status.taskId),
        orchestrator.audit(status.taskId),
      ]);
      return { taskId: status.taskId, state: status.state, ...historyOf(transcript, status), audit };
    },
  );

  route(
    app,
    docs,
    {
      method: 'POST',
      operationId: 'resolveReview',
      url: '/api/tasks/:taskId/review',
      summary:
        'An operator who also holds the review scope says what the held write did: happened (with its result), not_happened, or retry',
      params: taskParamsSchema,
      body: reviewBodySchema,
      response: decisionResultSchema,
      errors: {
        400: ['invalid_request'],
        403: ['csrf_token_invalid', 'cross_origin', 'operator_only', 'not_a_reviewer'],
        404: ['task_not_found'],
        409: ['not_waiting_for_review', 'invalid_review', 'task_finished'],
        413: ['body_too_large'],
      },
    },
    async (request) => {
      const { principal, taskId, body } = await prepare(request, reviewBodySchema);
      const note = body.note ? { note: body.note } : {};
      const result = await orchestrator.resolveReview(
        taskId,
        principal,
        body.resolution === 'happened'
          ? { resolution: 'happened', result: body.result ?? null, ...note }
          : { resolution: body.resolution, ...note },
      );
      return answered(result);
    },
    { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('decision') },
  );

  route(
    app,
    docs,
    {
      method: 'POST',
      operationId: 'retryModelNow',
      url: '/api/tasks/:taskId/retry-model',
      summary:
        'An operator asks the model again now for a task waiting out a model outage, instead of at its wake-up time; charged as one more model turn',
      params: taskParamsSchema,
      body: retryModelBodySchema,
      response: decisionResultSchema,
      errors: {
        400: ['invalid_request'],
        403: ['csrf_token_invalid', 'cross_origin', 'operator_only'],
        404: ['task_not_found'],
        409: ['not_waiting_for_model', 'budget_exhausted', 'task_finished'],
        413: ['body_too_large'],
      },
    },
    async (request) => {
      const { principal, taskId } = await prepare(request, retryModelBodySchema);
      const result = await orchestrator.retryModelNow(taskId, principal);
      return answered(result);
    },
    { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('decision') },
  );

  route(
    app,
    docs,
    {
      method: 'POST',
      operationId: 'forkTask',
      url: '/api/tasks/:taskId/fork',
      summary:
        'An operator copies the task from step N (its first N audit entries) into a new task run for them, offered only read tools and marked forkedFrom; refused for a task with a mandate, a sub-task or a workflow',
      params: taskParamsSchema,
      body: forkBodySchema,
      response: z.object({ status: taskStatusSchema }),
      successStatus: 201,
      errors: {
        400: ['invalid_request'],
        403: ['csrf_token_invalid', 'cross_origin', 'operator_only'],
        404: ['task_not_found'],
        409: ['fork_not_allowed'],
        413: ['body_too_large'],
      },
    },
    async (request, reply) => {
      const { principal, taskId, body } = await prepare(request, forkBodySchema);
      try {
        const status = await orchestrator.fork(taskId, principal, { step: body.step });
        reply.code(201);
        return { status };
      } catch (error) {
        if (error instanceof ForkNotAllowedError) throw serviceError(409, 'fork_not_allowed', error.message);
        throw error;
      }
    },
    { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('start') },
  );

  route(
    app,
    docs,
    {
      method: 'POST',
      operationId: 'eraseTask',
      url: '/api/tasks/:taskId/erase',
      summary:
        'An operator erases the task (snapshot, journals, indexes); a tombstone keeps when, why and who. A task running here is cancelled first only with cancelRunning',
      params: taskParamsSchema,
      body: eraseBodySchema,
      response: z.object({ tombstone: tombstoneSchema }),
      errors: {
        400: ['invalid_request'],
        403: ['csrf_token_invalid', 'cross_origin', 'operator_only'],
        404: ['task_not_found'],
        409: ['task_running'],
        413: ['body_too_large'],
        501: ['erasure_unsupported'],
        503: ['task_busy'],
      },
    },
    async (request) => {
      const { principal, taskId, body } = await prepare(request, eraseBodySchema);
      const tombstone = await orchestrator.erase(taskId, {
        reason: body.reason,
        by: `${principal.tenantId}:${principal.userId}`,
        ...(body.cancelRunning ? { cancelRunning: true } : {}),
      });
      return { tombstone };
    },
    { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('decision') },
  );
}

type Call = z.infer<typeof historySchema>['calls'][number];

/**
 * The transcript grouped by model turn (the goal and the user's answers join the turn they came in), and each call
 * the model proposed with what became of it: its result, or `awaiting_confirmation`, `outcome_unknown` (held for
 * review), `pending` (not run yet) or `not_run` (the task ended first).
 */
export function historyOf(
  transcript: readonly TranscriptEntry[],
  status: Pick<TaskStatus, 'pendingConfirmation' | 'review' | 'outcome'>,
): { turns: { turn: number; entries: TranscriptEntry[] }[]; calls: Call[] } {
  const turns: { turn: number; entries: TranscriptEntry[] }[] = [];
  const results = new Map<string, Extract<TranscriptEntry, { kind: 'result' }>['observation']>();
  for (const entry of transcript) {
    const turn = 'turn' in entry ? entry.turn : (turns.at(-1)?.turn ?? 0);
    if (turns.at(-1)?.turn !== turn) turns.push({ turn, entries: [] });
    turns.at(-1)!.entries.push(entry);
    if (entry.kind === 'result') results.set(entry.observation.callId, entry.observation);
  }
  const calls: Call[] = [];
  for (const entry of transcript) {
    if (entry.kind !== 'proposal') continue;
    for (const call of entry.calls) {
      const result = results.get(call.callId) ?? null;
      const phase = result
        ? 'finished'
        : status.review?.callId === call.callId
          ? 'outcome_unknown'
          : status.pendingConfirmation?.callId === call.callId
            ? 'awaiting_confirmation'
            : status.outcome
              ? 'not_run'
              : 'pending';
      calls.push({ callId: call.callId, tool: call.tool, turn: entry.turn, arguments: call.arguments, phase, result });
    }
  }
  return { turns, calls };
}
