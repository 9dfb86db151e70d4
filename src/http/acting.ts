/**
 * What every route that acts on a task checks first, in this order: who calls (their session), the CSRF token of that
 * session, the task id and the body, then that the caller may see the task (404 otherwise, as for a task that does
 * not exist). The decision routes and the operator routes both start here.
 */
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { type ServiceContext, parse } from './context.js';
import { taskParamsSchema } from './schemas.js';

export async function actingOn<S extends z.ZodType>(ctx: ServiceContext, request: FastifyRequest, schema: S) {
  const principal = await ctx.principal(request);
  ctx.csrf.check(request, principal);
  const { taskId } = parse(taskParamsSchema, request.params, 'params');
  const body = parse(schema, request.body, 'body');
  const { status } = await ctx.visible(principal, taskId);
  return { principal, taskId: status.taskId, body, status };
}
