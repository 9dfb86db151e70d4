/**
 * `statechart-agent/fastify`: the orchestrator as an HTTP service, a Fastify plugin. Routes under `/api` (start, list,
 * get, audit, events as SSE, replay, inbox, confirm, reject, answer, cancel, next), the OpenAPI document at
 * `/api/openapi.json`, and two pages: the approval inbox (`/inbox`) and the live task page (`/tasks/:taskId`).
 * The host authenticates; every read and decision is checked against the caller's tenant and user. The caller
 * never writes the rules: a start body gives the goal, a task id and an `input` the host reads, and the host's
 * `startRequest` derives the mandate, the limits and the success criterion from its own records (docs/service.md).
 *
 * Fastify is not loaded by this module (it only uses its types): the host brings its own Fastify 5 app.
 *
 * @example
 * const app = Fastify({ frameworkErrors: problemFrameworkErrors }); // the router's own errors as problems too
 * await app.register(agentService, {
 *   orchestrator,
 *   authenticate: (request) => sessions.principalOf(request), // -> { userId, tenantId, scopes } or null
 *   startRequest: async (body, principal) => {
 *     const order = await orders.find(principal.tenantId, body.input); // your records, not the caller's word
 *     return { goal: body.goal, taskId: body.taskId, mandate: refundMandate.of({ order_id: order.id, max_amount_cents: order.refundableCents }) };
 *   },
 * });
 * await app.listen({ port: 3000 });
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import type { AnyStateMachine } from 'xstate';
import { agentMachine } from '../../machines/agentMachine.js';
import { type Clock, systemClock } from '../clock.js';
import {
  AgentError,
  CapacityError,
  CatalogMismatchError,
  CorruptTaskError,
  EventPendingError,
  HostRequestError,
  MandateUsedError,
  QueueFullError,
  StoreUnavailableError,
  TaskBusyError,
  TaskExistsError,
  TaskNotFoundError,
  TaskQuarantinedError,
  TaskRunningError,
  UnsupportedVersionError,
} from '../errors.js';
import type { AgentErrorCode } from '../errorCodes.js';
import type { Orchestrator } from '../orchestrator/orchestrator.js';
import { type Authenticate, originsOf } from './access.js';
import { type ServiceContext, createContext } from './context.js';
import { registerDecisionRoutes } from './decisions.js';
import { registerOperatorRoutes } from './operatorRoutes.js';
import { type OpenApiOptions, type RouteDoc, openApiDocument } from './openapi.js';
import { registerPages } from './pages.js';
import { registerJsonParser } from './jsonBody.js';
import { PROBLEM_MEDIA_TYPE, problemOf } from './problem.js';
import { type RateLimitOptions, rateLimitProblem, registerRateLimit } from './rateLimit.js';
import { registerReadRoutes } from './routes.js';
import { ServiceError, ServiceOptionsError } from './serviceError.js';
import type { SseOptions } from './sse.js';
import type { StartRequest } from './start.js';
import type { Stepper } from './stepper.js';
import type { StatelyInspection } from '../inspect/statelyInspector.js';

export interface AgentServiceOptions {
  orchestrator: Orchestrator;
  /** The caller's principal from your session (cookie, bearer token...), or null when not signed in. */
  authenticate: Authenticate;
  /**
   * Required. The start request for a caller's body (`goal`, `taskId`, `input`) and their principal: the mandate,
   * the limits and the success criterion come from your own records, never from the body (a body that names them
   * gets 403 `caller_cannot_set_rules`). The task runs as `principal`; you may leave it out or narrow its scopes.
   */
  startRequest: StartRequest;
  /** Step the model one turn per `POST /api/tasks/:taskId/next` (the live page's "next"): `createStepper(model)`. */
  stepper?: Stepper;
  /**
   * Time travel in the Stately inspector too: the replay route (the live page's step controls) sends the step it
   * returns to the inspector (`createStatelyInspection(...)`, whose relay shows it only to who may see the task).
   */
  inspector?: Pick<StatelyInspection, 'showStep'>;
  /** The machine the live page draws (default: the agent machine). */
  machine?: AnyStateMachine;
  /** The orchestrator's clock: confirmation expiry is checked against it (default: the system clock). */
  clock?: Clock;
  /**
   * Secret of the CSRF tokens: set it (from your secret store, at least 32 random bytes) when the service runs as
   * several instances or restarts, so that a token one instance gave is accepted by every other. Default: random per
   * process, so a token dies with its process (the service's pages then fetch a new one and retry once).
   */
  csrfSecret?: string;
  /**
   * Behind a reverse proxy that rewrites `Host`: also accept a browser's `Origin` when it matches the forwarded host
   * (default false: only the `Host` header). The forwarded host is read as Fastify resolved it (`request.host`), so
   * it counts only from a proxy your app trusts: create the app with `Fastify({ trustProxy: '10.0.0.5' })` (an
   * address, a CIDR list or a hop count) and have the proxy send `X-Forwarded-Host`. Without Fastify's own
   * `trustProxy` this option believes nothing.
   */
  trustProxy?: boolean;
  /**
   * Exact origins (`https://app.example`, no path) whose browser pages may send decisions besides this host's own:
   * for a proxy that sends no `X-Forwarded-Host`, or pages served from another origin of yours. Default none.
   */
  allowedOrigins?: readonly string[];
  /**
   * The HTTP rate limit of starts and decisions, per caller (the principal, else the IP), with `@fastify/rate-limit`
   * (an optional peer: install it). Default on: 20 starts and 60 calls of each decision route per caller per minute;
   * over it, `429 rate_limited` with `Retry-After`. Give `{ starts, decisions, windowMs }` to change it, `redis` (an
   * ioredis client) to count across instances, or `false` to turn it off (when your gateway limits instead).
   */
  rateLimit?: RateLimitOptions | false;
  /** Largest request body in bytes (default 16 KiB); larger ones get 413 `body_too_large`. */
  bodyLimit?: number;
  /** Serve the inbox and live task pages (default true). */
  pages?: boolean;
  sse?: Partial<SseOptions>;
  /** Title of the OpenAPI document (also `openapi.info.title`). */
  title?: string;
  /** The OpenAPI document's info, security schemes and servers (`/api/openapi.json`). */
  openapi?: OpenApiOptions;
}

/** Registers the service on `app`; throws `ServiceOptionsError` for options it cannot run with safely. */
export async function agentService(app: FastifyInstance, options: AgentServiceOptions): Promise<void> {
  checkOptions(options);
  // Registered first: its onRoute hook must see the routes. It asks ctx for the principal (once per request).
  const rateLimit = await registerRateLimit(app, options.rateLimit, (request) => ctx.principal(request));
  const ctx: ServiceContext = createContext({
    ...options,
    rateLimit,
    ...(options.allowedOrigins !== undefined ? { allowedOrigins: allowedOriginsOf(options.allowedOrigins) } : {}),
    machine: options.machine ?? agentMachine,
    clock: options.clock ?? systemClock,
  });
  const docs: RouteDoc[] = [];
  // JSON only: a cross-site form can post text/plain without a preflight, so nothing but JSON is parsed here.
  app.removeContentTypeParser('text/plain');
  // Fastify's own refuses a `__proto__` key as if the body were not JSON; this one names the key (jsonBody.ts).
  registerJsonParser(app);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const { statusCode, body } = errorResponse(error);
    if (statusCode >= 500) request.log.error({ err: error }, 'agent service error');
    // Unavailable for now (busy, overloaded, at capacity, the store away): a client may try again shortly.
    if (statusCode === 503) void reply.header('retry-after', '1');
    // The tenant is at its cap (here or across the fleet): a slot frees when one of its tasks waits or ends.
    else if (body.code === 'tenant_at_capacity') void reply.header('retry-after', '5');
    // 202 event_pending is an acceptance, not a problem: plain JSON as before.
    if (statusCode < 400) return void reply.code(statusCode).send(body);
    void reply.code(statusCode).type(PROBLEM_MEDIA_TYPE).send(problemOf(statusCode, body));
  });
  app.setNotFoundHandler((request, reply) => {
    const body: ErrorBody = { code: 'not_found', message: `no route ${request.method} ${request.url}` };
    void reply.code(404).type(PROBLEM_MEDIA_TYPE).send(problemOf(404, body));
  });
  // Open event streams are hijacked responses: the server's close would wait on each until its client left, and a
  // page never leaves. They end first, with a `shutdown` event; their clients reconnect elsewhere and resume.
  app.addHook('preClose', async () => ctx.streams.closeAll());
  registerReadRoutes(app, ctx, docs);
  registerDecisionRoutes(app, ctx, docs);
  registerOperatorRoutes(app, ctx, docs);
  const document = openApiDocument(docs, app.prefix, {
    ...options.openapi,
    info: { ...(options.title ? { title: options.title } : {}), ...options.openapi?.info },
  });
  app.get('/api/openapi.json', async () => document);
  if (options.pages ?? true) registerPages(app, app.prefix);
}

function allowedOriginsOf(entries: readonly string[]): string[] {
  const checked = Array.isArray(entries) ? originsOf(entries) : { invalid: JSON.stringify(entries) };
  if ('invalid' in checked) {
    throw new ServiceOptionsError(
      'allowedOrigins',
      `allowedOrigins takes exact origins such as "https://app.example" (scheme, host and port, no path): ${checked.invalid} is not one`,
    );
  }
  return checked.origins;
}

function checkOptions(options: AgentServiceOptions): void {
  const rateLimitIssue = rateLimitProblem(options?.rateLimit);
  if (rateLimitIssue) throw new ServiceOptionsError('rateLimit', rateLimitIssue);
  if (options?.trustProxy !== undefined && typeof options.trustProxy !== 'boolean') {
    throw new ServiceOptionsError(
      'trustProxy',
      'trustProxy is true or false; which proxies are trusted is Fastify\'s own option: Fastify({ trustProxy: "10.0.0.5" })',
    );
  }
  if (typeof options?.authenticate !== 'function') {
    throw new ServiceOptionsError(
      'authenticate',
      'agentService needs authenticate(request): the principal ({ userId, tenantId, scopes }) of the signed-in caller from your session, or null',
    );
  }
  if (typeof options.startRequest !== 'function') {
    throw new ServiceOptionsError(
      'startRequest',
      "agentService needs startRequest(body, principal, request): derive the task's mandate, limits and success criterion from your own data (the order or ticket that body.input names, looked up for principal.tenantId) and return { goal: body.goal, taskId: body.taskId, mandate, limits, success }. The caller's body never sets them; see docs/service.md",
    );
  }
}

/**
 * The code and sentence of every error a route answers with (plus the unchanged status of a refused decision),
 * before `problemOf` makes it an RFC 9457 problem: the one place errors are serialized.
 */
function errorResponse(error: FastifyError | Error): { statusCode: number; body: ErrorBody<string> } {
  if (error instanceof ServiceError) {
    // The service's own (HttpErrorCode), or a code the host's startRequest chose for its refusal.
    const { statusCode, code, message, status } = error as ServiceError<string>;
    return { statusCode, body: { code, message, ...(status !== undefined ? { status } : {}) } };
  }
  return libraryErrorResponse(error);
}

interface ErrorBody<C extends string = AgentErrorCode> {
  code: C;
  message: string;
  status?: unknown;
  eventId?: string;
}

/** The answer to an error of this package, or of Fastify's parsing: its code is always an `AgentErrorCode`. */
function libraryErrorResponse(error: FastifyError | Error): { statusCode: number; body: ErrorBody } {
  const code = (error as FastifyError).code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return { statusCode: 413, body: { code: 'body_too_large', message: error.message } };
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return { statusCode: 415, body: { code: 'unsupported_media_type', message: 'send the body as application/json' } };
  // The body's own faults (empty, not JSON, a prototype key) are the service's JSON parser's ServiceErrors.
  if (code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' || (error as FastifyError).statusCode === 400)
    return { statusCode: 400, body: { code: 'invalid_request', message: error.message } };
  if (error instanceof HostRequestError) return { statusCode: 400, body: { code: error.code, message: error.message } };
  if (error instanceof TaskExistsError) return { statusCode: 409, body: { code: error.code, message: error.message } };
  if (error instanceof TaskNotFoundError)
    return { statusCode: 404, body: { code: error.code, message: error.message } };
  // A task whose stored data cannot be restored (damaged, or of a version this build does not read), as a quarantined
  // one: named with its problem, not an internal error.
  if (
    error instanceof TaskQuarantinedError ||
    error instanceof CorruptTaskError ||
    error instanceof UnsupportedVersionError
  )
    return { statusCode: 409, body: { code: error.code, message: error.message } };
  // Erasing a task this process runs needs cancelRunning (the operator's erase route).
  if (error instanceof TaskRunningError) return { statusCode: 409, body: { code: error.code, message: error.message } };
  if (error instanceof TaskBusyError) return { statusCode: 503, body: { code: error.code, message: error.message } };
  // The store away, or this process too busy to hear it (process_overloaded): another instance, or a moment, helps.
  if (error instanceof StoreUnavailableError)
    return { statusCode: 503, body: { code: error.code, message: error.message } };
  if (error instanceof MandateUsedError) return { statusCode: 409, body: { code: error.code, message: error.message } };
  // This instance lacks the task's tools as they were; one that has them can take the call.
  if (error instanceof CatalogMismatchError)
    return { statusCode: 503, body: { code: error.code, message: error.message } };
  if (error instanceof CapacityError)
    return { statusCode: error.scope === 'process' ? 503 : 429, body: { code: error.code, message: error.message } };
  if (error instanceof QueueFullError)
    return { statusCode: error.scope === 'queue' ? 503 : 429, body: { code: error.code, message: error.message } };
  // Recorded, to be applied by the worker that drives the task: accepted for processing, not a failure.
  if (error instanceof EventPendingError)
    return { statusCode: 202, body: { code: error.code, message: error.message, eventId: error.eventId } };
  if (error instanceof AgentError) {
    switch (error.code) {
      case 'settle_timeout':
        return { statusCode: 504, body: { code: error.code, message: error.message } };
      case 'erasure_unsupported':
        return { statusCode: 501, body: { code: error.code, message: error.message } };
      case 'orchestrator_draining':
      case 'orchestrator_closed':
        return { statusCode: 503, body: { code: error.code, message: error.message } };
    }
  }
  return { statusCode: 500, body: { code: 'internal_error', message: 'the service failed; see its log' } };
}

export { createStepper, type Stepper } from './stepper.js';
export { problemFrameworkErrors } from './frameworkErrors.js';
export { accessOf, CsrfGuard, type Access, type Authenticate } from './access.js';
export { chartLayout, type ChartLayout, type LaidOutEdge, type LaidOutState } from './chartLayout.js';
export { earlierProposals } from './inbox.js';
export { ServiceError, ServiceOptionsError } from './serviceError.js';
export { PROBLEM_MEDIA_TYPE, problemTitle, problemType, type Problem } from './problem.js';
export { CALLER_FORBIDDEN_FIELDS } from './schemas.js';
export type { InboxItem, EarlierProposal, StartBody } from './schemas.js';
export { callerTaskId, type HostStartRequest, type StartRequest } from './start.js';
export type { SseOptions } from './sse.js';
export type { OpenApiOptions } from './openapi.js';
export { RATE_LIMIT_DEFAULTS, type RateLimitOptions } from './rateLimit.js';
export { taskStatusSchema } from '../orchestrator/statusSchema.js';
export { AGENT_ERROR_CODE_LIST, isAgentErrorCode, type AgentErrorCode, type HttpErrorCode } from '../errorCodes.js';
