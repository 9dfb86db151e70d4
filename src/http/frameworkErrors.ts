/**
 * The errors Fastify's router answers before any route or plugin runs, as the service's problems. A path with a
 * malformed percent-escape (`/api/tasks/ab%ZZ`) or a path parameter past `maxParamLength` (a task id of 101
 * characters, by default) never reaches the plugin's error or not-found handler: Fastify answers it itself, in its
 * own JSON, unless the app was created with a `frameworkErrors` option. That is a server option the plugin cannot
 * set, so the host passes this one.
 *
 * @example
 * const app = Fastify({ frameworkErrors: problemFrameworkErrors });
 * await app.register(agentService, { orchestrator, authenticate, startRequest });
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HttpErrorCode } from '../errorCodes.js';
import { PROBLEM_MEDIA_TYPE, problemOf } from './problem.js';

/**
 * Fastify's `frameworkErrors` server option: answers the router's own errors as `application/problem+json` with a
 * specific code, like every error of the service. It serves the whole app (the router runs before any plugin), so
 * the host's own routes get these answers too. The path is not repeated: it is the caller's, and may be long.
 */
export function problemFrameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const { statusCode, code, message } = frameworkProblem(error, request);
  if (statusCode >= 500) request.log.error({ err: error }, 'agent service error');
  void reply.code(statusCode).type(PROBLEM_MEDIA_TYPE).send(problemOf(statusCode, { code, message }));
}

function frameworkProblem(
  error: FastifyError,
  request: FastifyRequest,
): { statusCode: number; code: HttpErrorCode; message: string } {
  switch (error.code) {
    case 'FST_ERR_BAD_URL':
      return {
        statusCode: 400,
        code: 'invalid_url_encoding',
        message:
          "the URL's path is not validly percent-encoded (a % not followed by two hex digits, or escapes that are not UTF-8)",
      };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return {
        statusCode: 414,
        code: 'path_param_too_long',
        message: `a parameter of the URL's path (such as a task id) is longer than this server takes (${routerParamLimit(
          request.server,
        )} characters as sent, percent-escapes included: Fastify's maxParamLength)`,
      };
    default:
      // An asynchronous route constraint that threw (FST_ERR_ASYNC_CONSTRAINT), or one Fastify adds later.
      return { statusCode: 500, code: 'internal_error', message: 'the service failed; see its log' };
  }
}

/**
 * The longest path parameter the app's router takes, as sent (percent-escapes count three characters): the app's
 * `routerOptions.maxParamLength`, else its top-level `maxParamLength` (deprecated in Fastify 5, still obeyed), else
 * Fastify's default, 100. Reading either does not warn; only setting the top-level one does.
 */
export function routerParamLimit(server: FastifyInstance | undefined): number {
  const config = server?.initialConfig as
    { maxParamLength?: unknown; routerOptions?: { maxParamLength?: unknown } } | undefined;
  for (const limit of [config?.routerOptions?.maxParamLength, config?.maxParamLength])
    if (typeof limit === 'number' && Number.isInteger(limit) && limit > 0) return limit;
  return 100;
}
