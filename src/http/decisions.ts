/**
 * The decision routes: confirm, reject, answer, cancel, and `next` (let a stepped task's model take its turn).
 * Each checks the session (401), CSRF for browser sessions (403) and the body (400), then hands the decision to the
 * orchestrator, which hands it to the chart: a confirmation or a rejection is decided by the chart's own named
 * guards, exactly as through `orchestrator.confirm`/`reject` or the step CLI, so the same request gets the same
 * answer and the same change (or none) by every door. Here the answer only becomes HTTP: its code maps to a status
 * (`refusalStatus`), and a caller who may not see the task gets 404 `task_not_found` whatever the chart said, so ids
 * leak nothing (the attempt is still in the task's audit, as it would be through the library).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { HttpErrorCode } from '../errorCodes.js';
import type { UserEventResult } from '../orchestrator/orchestrator.js';
import { notFound } from './access.js';
import { actingOn } from './acting.js';
import { type ServiceContext, parse } from './context.js';
import type { RouteDoc } from './openapi.js';
import { route } from './routes.js';
import {
  answerBodySchema,
  cancelBodySchema,
  confirmBodySchema,
  decisionResultSchema,
  emptyBodySchema,
  rejectBodySchema,
  taskParamsSchema,
} from './schemas.js';
import { answered, serviceError } from './serviceError.js';

const COMMON_ERRORS: Record<number, readonly HttpErrorCode[]> = {
  400: ['invalid_request'],
  403: [
    'csrf_token_invalid',
    'cross_origin',
    'wrong_user',
    'self_approval',
    'missing_approver_scope',
    'permission_denied',
  ],
  404: ['task_not_found'],
  413: ['body_too_large'],
  415: ['unsupported_media_type'],
};

export function registerDecisionRoutes(app: FastifyInstance, ctx: ServiceContext, docs: RouteDoc[]): void {
  const { orchestrator } = ctx;

  /** The caller, their view of the task, and the parsed body; throws the 4xx that applies. */
  const prepare = <S extends z.ZodType>(request: FastifyRequest, schema: S) => actingOn(ctx, request, schema);
  /** As `prepare`, for a decision the chart takes from anyone: the caller's access only shapes the answer. */
  const prepareDecision = async <S extends z.ZodType>(request: FastifyRequest, schema: S) => {
    const principal = await ctx.principal(request);
    ctx.csrf.check(request, principal);
    const params = parse(taskParamsSchema, request.params, 'params');
    const body = parse(schema, request.body, 'body');
    const { status, access } = await ctx.addressed(principal, params.taskId);
    /** The chart's answer as HTTP: 200, the refusal's status and code, or 404 to a caller who may not see the task. */
    const answer = (result: UserEventResult) => {
      if (!access) throw notFound(params.taskId);
      return answered(result);
    };
    return { principal, taskId: status.taskId, body, answer };
  };
  const decision = (
    operationId: string,
    url: string,
    summary: string,
    body: z.ZodType,
    extra: Record<number, readonly HttpErrorCode[]>,
    handler: (request: FastifyRequest) => Promise<unknown>,
  ) =>
    route(
      app,
      docs,
      {
        method: 'POST',
        operationId,
        url,
        summary,
        params: taskParamsSchema,
        body,
        response: decisionResultSchema,
        errors: { ...COMMON_ERRORS, ...extra },
      },
      handler,
      { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('decision') },
    );

  decision(
    'confirmCall',
    '/api/tasks/:taskId/confirm',
    'Confirm (or approve) the pending call: its confirmation id and the hash of exactly its arguments',
    confirmBodySchema,
    {
      409: [
        'not_waiting_for_confirmation',
        'unknown_confirmation',
        'arguments_changed',
        'policy_changed',
        'already_approved',
        'task_finished',
      ],
      410: ['confirmation_expired'],
    },
    async (request) => {
      const { principal, taskId, body, answer } = await prepareDecision(request, confirmBodySchema);
      return answer(
        await orchestrator.confirm(taskId, principal, { id: body.confirmationId, argsHash: body.argsHash }),
      );
    },
  );

  decision(
    'rejectCall',
    '/api/tasks/:taskId/reject',
    'Reject the pending call: it will not run (the model is told, or the task is cancelled when the tool says so)',
    rejectBodySchema,
    { 409: ['not_waiting_for_confirmation', 'unknown_confirmation', 'task_finished'] },
    async (request) => {
      const { principal, taskId, body, answer } = await prepareDecision(request, rejectBodySchema);
      return answer(
        await orchestrator.reject(taskId, principal, {
          id: body.confirmationId,
          ...(body.reason ? { reason: body.reason } : {}),
        }),
      );
    },
  );

  decision(
    'answerQuestion',
    '/api/tasks/:taskId/answer',
    "Answer the model's question (the task's user only)",
    answerBodySchema,
    { 409: ['not_waiting_for_answer', 'task_finished'], 410: ['question_expired'] },
    async (request) => {
      const { principal, taskId, body } = await prepare(request, answerBodySchema);
      return answered(await orchestrator.answer(taskId, principal, body.text));
    },
  );

  decision(
    'cancelTask',
    '/api/tasks/:taskId/cancel',
    'Cancel the task (its user, or an administrator)',
    cancelBodySchema,
    { 409: ['task_finished'] },
    async (request) => {
      const { principal, taskId, body } = await prepare(request, cancelBodySchema);
      return answered(await orchestrator.cancel(taskId, principal, body.reason ?? ''));
    },
  );

  decision(
    'stepModel',
    '/api/tasks/:taskId/next',
    'Stepping: let the task model take its waiting turn; answers once the task waits again (for the model or a human) or ends',
    emptyBodySchema,
    { 409: ['not_stepping', 'model_not_waiting'] },
    async (request) => {
      const { principal, taskId, status } = await prepare(request, emptyBodySchema);
      const stepper = ctx.stepper;
      if (!stepper)
        throw serviceError(
          409,
          'not_stepping',
          'this service does not step its model (start it with a stepper)',
          status,
        );
      if (status.principal.userId !== principal.userId)
        throw serviceError(403, 'wrong_user', 'only the task user steps it', status);
      if (!stepper.release(taskId))
        throw serviceError(
          409,
          'model_not_waiting',
          `the model of ${taskId} is not waiting for its turn (${status.state})`,
          status,
        );
      await Promise.race([orchestrator.settled(taskId), stepper.whenWaiting(taskId)]);
      return {
        accepted: true,
        code: null,
        message: `model turn ${status.turn + 1} released`,
        status: await orchestrator.status(taskId),
      };
    },
  );
}
