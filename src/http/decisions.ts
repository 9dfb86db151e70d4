/**
 * The decision routes: confirm, reject, answer, cancel, and `next` (let a stepped task's model take its turn).
 * Each checks the session (401), CSRF for browser sessions (403), that the caller may see the task (404), and, for
 * a confirmation, that the request names the confirmation pending now, with the hash of exactly its arguments,
 * before it expires: a forged, replayed or expired decision gets a 409/410 with the chart's own code and never
 * reaches the task, so it changes nothing (not even a new request of the confirmation). What passes is decided by
 * the chart, and a refusal comes back as a 4xx with its code (`wrong_user`, `self_approval`...).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CONFIRMATION_REFUSALS } from '../../machines/failures.js';
import type { HttpErrorCode } from '../errorCodes.js';
import type { TaskStatus, UserEventResult } from '../orchestrator/orchestrator.js';
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
import { refusalStatus, serviceError } from './serviceError.js';

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
  const prepare = async <S extends z.ZodType>(request: FastifyRequest, schema: S) => {
    const principal = await ctx.principal(request);
    ctx.csrf.check(request, principal);
    const { taskId } = parse(taskParamsSchema, request.params, 'params');
    const body = parse(schema, request.body, 'body');
    const { status } = await ctx.visible(principal, taskId);
    return { principal, taskId: status.taskId, body, status };
  };
  const answered = (result: UserEventResult) => {
    if (!result.accepted)
      throw serviceError(refusalStatus(result.code), result.code ?? 'not_taken', result.message, result.status);
    return result;
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
        'already_approved',
        'task_finished',
      ],
      410: ['confirmation_expired'],
    },
    async (request) => {
      const { principal, taskId, body, status } = await prepare(request, confirmBodySchema);
      const pending = pendingNamed(status, body.confirmationId);
      if (pending.argsHash !== body.argsHash)
        throw serviceError(409, 'arguments_changed', refusal('arguments_changed'), status);
      if (pending.expiresAt <= ctx.clock.now())
        throw serviceError(410, 'confirmation_expired', refusal('confirmation_expired'), status);
      return answered(await orchestrator.confirm(taskId, principal, { id: pending.id, argsHash: body.argsHash }));
    },
  );

  decision(
    'rejectCall',
    '/api/tasks/:taskId/reject',
    'Reject the pending call: it will not run (the model is told, or the task is cancelled when the tool says so)',
    rejectBodySchema,
    { 409: ['not_waiting_for_confirmation', 'unknown_confirmation', 'task_finished'], 410: ['confirmation_expired'] },
    async (request) => {
      const { principal, taskId, body, status } = await prepare(request, rejectBodySchema);
      const pending = pendingNamed(status, body.confirmationId);
      if (pending.expiresAt <= ctx.clock.now())
        throw serviceError(410, 'confirmation_expired', refusal('confirmation_expired'), status);
      return answered(
        await orchestrator.reject(taskId, principal, {
          id: pending.id,
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

/** The pending confirmation, when the request names it; else the 409 that says why not. */
function pendingNamed(status: TaskStatus, confirmationId: string) {
  const pending = status.pendingConfirmation;
  if (status.outcome)
    throw serviceError(409, 'task_finished', `the task already ended (${status.outcome.status})`, status);
  if (!pending || status.state !== 'waiting_for_confirmation') {
    throw serviceError(
      409,
      'not_waiting_for_confirmation',
      `the task is not waiting for a confirmation (${status.state})`,
      status,
    );
  }
  if (pending.id !== confirmationId)
    throw serviceError(409, 'unknown_confirmation', refusal('unknown_confirmation'), status);
  return pending;
}

function refusal(code: keyof typeof CONFIRMATION_REFUSALS): string {
  return CONFIRMATION_REFUSALS[code].replace(/; it is asked again$/, '');
}
