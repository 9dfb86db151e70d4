/**
 * The read routes and `start`: the caller's session, start a task, list the tasks the caller may see, one task (with
 * the step controls allowed now), its audit, its events (SSE), the task at step N (time travel), the approval
 * inbox, and the chart's layout for the live page. Decisions are in `decisions.ts`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import { replayAudit } from '../audit/replayAudit.js';
import { allowedCommands } from '../cli/stepView.js';
import type { TaskStatus } from '../orchestrator/orchestrator.js';
import { taskStatusSchema } from '../orchestrator/statusSchema.js';
import type { TaskSummary } from '../store/summary.js';
import { listedStatus } from '../orchestrator/taskSearch.js';
import { type Access, accessOf, decidesPending } from './access.js';
import { chartLayout } from './chartLayout.js';
import { type ServiceContext, parse } from './context.js';
import { inboxItem } from './inbox.js';
import type { RouteDoc } from './openapi.js';
import {
  accessSchema,
  auditQuerySchema,
  eventsQuerySchema,
  inboxItemSchema,
  lastEventIdSchema,
  listQuerySchema,
  maySchema,
  replayQuerySchema,
  sessionSchema,
  startBodySchema,
  summarySchema,
  taskParamsSchema,
} from './schemas.js';
import { streamTaskEvents } from './sse.js';
import { routerParamLimit } from './frameworkErrors.js';
import { hostStartRequest, refuseCallerRules, refuseLongTaskId } from './start.js';

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/**
 * Registers a route and records its documentation for the OpenAPI document; a rate-limited route (its
 * `@fastify/rate-limit` config) documents `429 rate_limited` too.
 */
export function route(
  app: FastifyInstance,
  docs: RouteDoc[],
  doc: RouteDoc,
  handler: Handler,
  options: { bodyLimit?: number; rateLimit?: Record<string, unknown> | undefined } = {},
): void {
  const { bodyLimit, rateLimit } = options;
  docs.push(rateLimit ? { ...doc, errors: { ...doc.errors, 429: ['rate_limited'] } } : doc);
  app.route({
    method: doc.method,
    url: doc.url,
    handler,
    ...(bodyLimit ? { bodyLimit } : {}),
    ...(rateLimit ? { config: { rateLimit } } : {}),
  });
}

const taskView = z.object({
  status: taskStatusSchema,
  access: accessSchema,
  /** The controls the task's state offers to somebody (the step CLI's commands); `may` says which are the caller's. */
  allowed: z.array(z.string()),
  may: maySchema,
  modelWaiting: z.boolean(),
});

export function registerReadRoutes(app: FastifyInstance, ctx: ServiceContext, docs: RouteDoc[]): void {
  const { orchestrator } = ctx;
  const modelWaiting = (status: TaskStatus) => !status.outcome && ctx.stepper?.waiting(status.taskId) != null;
  const view = (status: TaskStatus, access: Access, principal: Principal) => {
    const allowed = allowedCommands(status, modelWaiting(status)).filter((c) => c !== 'quit' && c !== 'resolve');
    const may = orchestrator.may(status, principal);
    const offered = (action: 'confirm' | 'reject' | 'cancel' | 'answer') => allowed.includes(action) && may[action];
    return {
      status,
      access,
      allowed,
      may: {
        confirm: offered('confirm'),
        reject: offered('reject'),
        cancel: offered('cancel'),
        answer: offered('answer'),
        next: allowed.includes('next') && access === 'owner',
        refused: may.refused.filter((r) => allowed.includes(r.action)),
      },
      modelWaiting: modelWaiting(status),
    };
  };

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getSession',
      url: '/api/session',
      summary: 'The signed-in caller and the CSRF token for browser decisions',
      response: sessionSchema,
    },
    async (request) => {
      const principal = await ctx.principal(request);
      return { principal, csrfToken: ctx.csrf.token(principal), stepping: ctx.stepper !== null };
    },
  );

  route(
    app,
    docs,
    {
      method: 'POST',
      operationId: 'startTask',
      url: '/api/tasks',
      summary:
        "Start a task for the caller; the host derives its mandate, limits and success criterion from the host's own records",
      body: startBodySchema,
      response: taskView,
      successStatus: 201,
      errors: {
        400: ['invalid_request'],
        403: ['csrf_token_invalid', 'cross_origin', 'caller_cannot_set_rules'],
        409: ['task_exists'],
        413: ['body_too_large'],
        500: ['start_request_principal_mismatch', 'start_request_invalid'],
      },
    },
    async (request, reply) => {
      const principal = await ctx.principal(request);
      ctx.csrf.check(request, principal);
      refuseCallerRules(request.body);
      const body = parse(startBodySchema, request.body, 'body');
      refuseLongTaskId(principal, body.taskId, routerParamLimit(request.server));
      const status = await orchestrator.start(await hostStartRequest(ctx.startRequest, body, principal, request));
      reply.code(201);
      return view(status, 'owner', principal);
    },
    { bodyLimit: ctx.bodyLimit, rateLimit: ctx.rateLimit?.('start') },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'listTasks',
      url: '/api/tasks',
      summary:
        "Tasks the caller may see: theirs, those waiting for their approval, and (an operator) their tenant's; filtered (state, what it waits for, tool, user, id, age) and paged",
      query: listQuerySchema,
      response: z.object({ tasks: z.array(summarySchema) }),
      errors: { 400: ['invalid_query'] },
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const query = parse(listQuerySchema, request.query, 'query', 'invalid_query');
      const tasks = [];
      const operator = orchestrator.adminScope !== null && principal.scopes.includes(orchestrator.adminScope);
      let skipped = 0;
      // An operator sees every task the search finds, so the search pages, and reads no status past the page.
      const searchPages = operator && !query.waiting;
      const found = await orchestrator.search({
        tenantId: principal.tenantId,
        ...(query.state ? { states: query.state } : {}),
        ...(query.waitingFor ? { waitingFor: query.waitingFor } : {}),
        ...(query.tool ? { tool: query.tool } : {}),
        ...(query.user ? { userId: query.user } : {}),
        ...(query.q ? { idContains: query.q } : {}),
        ...(query.olderThanMs !== undefined ? { createdAtMost: ctx.clock.now() - query.olderThanMs } : {}),
        ...(searchPages ? { offset: query.offset ?? 0, ...(query.limit ? { limit: query.limit } : {}) } : {}),
        // Someone else's task is read only if it may wait for this caller's approval (decided below on its status).
        ...(operator
          ? {}
          : {
              mayShow: (s: TaskSummary) => s.userId === principal.userId || s.state === 'waiting_for_confirmation',
            }),
      });
      for (const summary of found) {
        const mine = summary.userId === principal.userId;
        let access: 'owner' | 'approver' | 'operator' = mine ? 'owner' : 'operator';
        // Someone else's task is visible to a non-operator only while it waits for a confirmation they may approve.
        if (!mine && !operator && summary.state !== 'waiting_for_confirmation') continue;
        if ((!mine && !operator) || query.waiting) {
          const status = await listedStatus(orchestrator, summary.taskId);
          if (!status) continue;
          const seen = accessOf(principal, status, orchestrator.adminScope);
          if (!seen || seen === 'decided' || (query.waiting && !waitsFor(principal, status))) continue;
          access = seen;
        }
        if (!searchPages && query.offset && skipped < query.offset) {
          skipped += 1;
          continue;
        }
        const { wakeAt: _wake, ...rest } = summary;
        tasks.push({ ...rest, access });
        if (query.limit && tasks.length >= query.limit) break;
      }
      return { tasks };
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getTask',
      url: '/api/tasks/:taskId',
      summary: 'One task, with the step controls allowed now',
      params: taskParamsSchema,
      response: taskView,
      errors: { 404: ['task_not_found'] },
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const { taskId } = parse(taskParamsSchema, request.params, 'params');
      const { status, access } = await ctx.visible(principal, taskId);
      return view(status, access, principal);
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getTaskAudit',
      url: '/api/tasks/:taskId/audit',
      summary: 'The task audit trail (from an offset)',
      params: taskParamsSchema,
      query: auditQuerySchema,
      response: z.object({ entries: z.array(z.unknown()) }),
      errors: { 404: ['task_not_found'] },
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const { taskId } = parse(taskParamsSchema, request.params, 'params');
      const { from } = parse(auditQuerySchema, request.query, 'query', 'invalid_query');
      const { status } = await ctx.visible(principal, taskId);
      return { entries: await orchestrator.audit(status.taskId, from ?? 0) };
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'streamTaskEvents',
      url: '/api/tasks/:taskId/events',
      summary: 'The task events as Server-Sent Events; resumes after Last-Event-ID (header, or lastEventId query)',
      params: taskParamsSchema,
      query: eventsQuerySchema,
      response: {
        mediaType: 'text/event-stream',
        description: 'events gate, check, confirmation, tool, lookup, review, stop, entry, status; then end',
      },
      errors: { 400: ['invalid_last_event_id', 'unknown_event_id'], 404: ['task_not_found'] },
    },
    async (request, reply) => {
      const principal = await ctx.principal(request);
      const { taskId } = parse(taskParamsSchema, request.params, 'params');
      const query = parse(eventsQuerySchema, request.query, 'query', 'invalid_query');
      const header = request.headers['last-event-id'];
      const lastId = typeof header === 'string' && header !== '' ? header : query.lastEventId;
      const resume =
        lastId === undefined ? null : parse(lastEventIdSchema, lastId, 'Last-Event-ID', 'invalid_last_event_id');
      const { access, status } = await ctx.visible(principal, taskId);
      // An owner sees their task for good, and so does an approver once they decided; an approver who has not decided
      // only while its confirmation waits for them.
      const stillVisible =
        access === 'owner'
          ? undefined
          : () =>
              ctx.visible(principal, status.taskId).then(
                () => true,
                () => false,
              );
      // The live model text is the transcript as it is written: for those who may read the history (operatorRoutes).
      const modelText = access === 'owner' || access === 'operator';
      await streamTaskEvents(
        request,
        reply,
        orchestrator,
        status.taskId,
        resume,
        ctx.sse,
        stillVisible,
        ctx.streams,
        modelText,
      );
      return reply;
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'replayTask',
      url: '/api/tasks/:taskId/replay',
      summary: 'The task as it was after its first N audit entries (time travel)',
      params: taskParamsSchema,
      query: replayQuerySchema,
      response: z.object({ auditLength: z.number(), replay: z.unknown() }),
      errors: { 404: ['task_not_found'] },
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const { taskId } = parse(taskParamsSchema, request.params, 'params');
      const { at } = parse(replayQuerySchema, request.query, 'query', 'invalid_query');
      const { status } = await ctx.visible(principal, taskId);
      const audit = await orchestrator.audit(status.taskId);
      // A journal written before transitions were recorded: its last step is the state the task is in now.
      const replay = replayAudit(audit, at ?? audit.length, status.stateValue);
      ctx.inspector?.showStep({ taskId: status.taskId, replayed: replay, access: status });
      return { auditLength: audit.length, replay };
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getInbox',
      url: '/api/inbox',
      summary: 'The confirmations the caller may decide now',
      response: z.object({ items: z.array(inboxItemSchema) }),
    },
    async (request) => {
      const principal = await ctx.principal(request);
      const items = [];
      for (const summary of await orchestrator.list({ states: ['waiting_for_confirmation'] })) {
        if (summary.tenantId !== principal.tenantId) continue;
        const status = await listedStatus(orchestrator, summary.taskId);
        const item = status && (await inboxItem(orchestrator, principal, status, ctx.clock.now()));
        if (item) items.push(item);
      }
      items.sort((a, b) => a.expiresAt - b.expiresAt);
      return { items };
    },
  );

  route(
    app,
    docs,
    {
      method: 'GET',
      operationId: 'getChart',
      url: '/api/chart',
      summary: 'The statechart laid out by elkjs, for the live page',
      response: z.unknown(),
    },
    async (request) => {
      await ctx.principal(request);
      return chartLayout(ctx.machine);
    },
  );
}

/** The task waits for this caller: a confirmation they decide, or their own task's question. */
function waitsFor(principal: Principal, status: TaskStatus): boolean {
  if (status.state === 'waiting_for_confirmation') return decidesPending(principal, status) !== null;
  return status.state === 'waiting_for_user' && status.principal.userId === principal.userId;
}
