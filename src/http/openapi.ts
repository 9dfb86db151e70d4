/**
 * The OpenAPI 3.1 document of the service, generated from the route table and the zod schemas the handlers parse
 * with (`z.toJSONSchema`), so the document cannot drift from what the handlers accept.
 */
import { z } from 'zod';
import type { HttpErrorCode } from '../errorCodes.js';
import { PROBLEM_MEDIA_TYPE } from './problem.js';
import { problemSchema } from './schemas.js';

export interface RouteDoc {
  method: 'GET' | 'POST';
  /** The operation's name for generated clients: unique, lowerCamelCase (`startTask`). */
  operationId: string;
  /** Fastify syntax: `/api/tasks/:taskId`. */
  url: string;
  summary: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The success response: a schema, or a media type with a description (SSE, HTML). */
  response: z.ZodType | { mediaType: string; description: string };
  /** The success status when it is not 200 (201 for a start). */
  successStatus?: 201;
  /** Error codes this route answers with, by HTTP status. */
  errors?: Record<number, readonly HttpErrorCode[]>;
}

/** What the host says about its API: the document cannot know how the host signs callers in, nor its license. */
export interface OpenApiOptions {
  /** Default: title "statechart-agent service", version "1". */
  info?: { title?: string; version?: string; description?: string; license?: { name: string; identifier?: string } };
  /**
   * How callers sign in, as OpenAPI security schemes; every operation requires one of them. Default: `session`, an
   * HTTP bearer scheme (what the demo's `authenticate` reads). Name your cookie or OAuth scheme here when
   * `authenticate` reads one.
   */
  securitySchemes?: Record<string, Record<string, unknown>>;
  /** Default: one server, the service's own origin and prefix (`url: '/'`). */
  servers?: { url: string; description?: string }[];
}

const DEFAULT_SECURITY: Record<string, Record<string, unknown>> = {
  session: {
    type: 'http',
    scheme: 'bearer',
    description: "The host's authenticate(request) decides who the caller is; the demo reads a bearer token",
  },
};

export function openApiDocument(
  routes: readonly RouteDoc[],
  prefix: string,
  options: OpenApiOptions = {},
): Record<string, unknown> {
  const schemas = new Schemas();
  const ids = new Set<string>();
  for (const route of routes) {
    if (ids.has(route.operationId)) throw new Error(`two routes have the operationId ${route.operationId}`);
    ids.add(route.operationId);
  }
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = `${prefix}${route.url}`.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters = [
      ...objectParameters(schemas, route.params, 'path'),
      ...objectParameters(schemas, route.query, 'query'),
    ];
    const responses: Record<string, unknown> = {
      [route.successStatus ?? 200]:
        'mediaType' in route.response
          ? { description: route.response.description, content: { [route.response.mediaType]: {} } }
          : {
              description: route.successStatus === 201 ? 'Created' : 'OK',
              content: { 'application/json': { schema: schemas.of(route.response) } },
            },
    };
    for (const [status, codes] of Object.entries({ 401: ['unauthenticated'], ...errorsOf(route) })) {
      responses[status] = {
        description: codes.join(', '),
        content: { [PROBLEM_MEDIA_TYPE]: { schema: schemas.named('Problem', problemSchema) } },
      };
    }
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(parameters.length ? { parameters } : {}),
      ...(route.body
        ? { requestBody: { required: true, content: { 'application/json': { schema: schemas.of(route.body) } } } }
        : {}),
      responses,
    };
  }
  const securitySchemes = options.securitySchemes ?? DEFAULT_SECURITY;
  return {
    openapi: '3.1.0',
    info: { title: 'statechart-agent service', version: '1', ...options.info },
    servers: options.servers ?? [{ url: prefix || '/', description: 'this service' }],
    security: Object.keys(securitySchemes).map((name) => ({ [name]: [] })),
    paths,
    components: { schemas: schemas.components, securitySchemes },
  };
}

/** What the service's JSON parser answers a route that takes a body with, besides the route's own refusals. */
const BODY_ERRORS: Record<number, readonly HttpErrorCode[]> = { 400: ['invalid_json', 'forbidden_json_key'] };

function errorsOf(route: RouteDoc): Record<number, readonly HttpErrorCode[]> {
  if (!route.body) return route.errors ?? {};
  const errors = { ...route.errors };
  for (const [status, codes] of Object.entries(BODY_ERRORS))
    errors[Number(status)] = [...new Set([...(errors[Number(status)] ?? []), ...codes])];
  return errors;
}

/**
 * The document's schemas: each route's JSON Schema (from zod), with what zod puts in a schema's own `$defs` (the
 * recursive JSON value) moved to `components.schemas` once, named by content, and the refs pointed there: an
 * OpenAPI document resolves `#/...` from its root, where a schema's own `$defs` are not.
 */
class Schemas {
  readonly components: Record<string, unknown> = {};
  private readonly byContent = new Map<string, string>();

  of(schema: z.ZodType): unknown {
    const {
      $schema: _ignored,
      $defs,
      ...rest
    } = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
    }) as Record<string, unknown> & { $defs?: Record<string, unknown> };
    // Names first (a def may refer to one listed after it), then the defs with their refs pointed at the names.
    const defs = Object.entries($defs ?? {});
    const names = new Map(defs.map(([local, def]) => [local, this.nameOf(local, def)]));
    for (const [local, def] of defs) this.components[names.get(local)!] ??= repointRefs(def, names);
    return repointRefs(rest, names);
  }

  /** `schema` as a named component (`Error`), referenced wherever it is used. */
  named(name: string, schema: z.ZodType): { $ref: string } {
    if (!(name in this.components)) this.components[name] = this.of(schema);
    return { $ref: `#/components/schemas/${name}` };
  }

  /**
   * zod names a def by its schema's meta id (TaskStatus), else `__schemaN` (the first is the recursive JSON value
   * of tool arguments and results): the same content gets one name.
   */
  private nameOf(local: string, def: unknown): string {
    const key = JSON.stringify(def);
    let name = this.byContent.get(key);
    if (name === undefined) {
      name = !local.startsWith('__schema')
        ? local
        : [...this.byContent.values()].includes('JsonValue')
          ? `Schema${this.byContent.size}`
          : 'JsonValue';
      this.byContent.set(key, name);
    }
    return name;
  }
}

function repointRefs(value: unknown, names: ReadonlyMap<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => repointRefs(item, names));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const local = key === '$ref' && typeof item === 'string' && item.startsWith('#/$defs/') ? item.slice(8) : null;
    out[key] =
      local !== null && names.has(local) ? `#/components/schemas/${names.get(local)}` : repointRefs(item, names);
  }
  return out;
}

function objectParameters(schemas: Schemas, schema: z.ZodObject | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return [];
  const json = schemas.of(schema) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    schema: property,
  }));
}
