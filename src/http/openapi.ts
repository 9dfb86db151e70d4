/**
 * The OpenAPI 3.1 document of the service, generated from the route table and the zod schemas the handlers parse
 * with (`z.toJSONSchema`), so the document cannot drift from what the handlers accept.
 */
import { z } from 'zod';
import type { HttpErrorCode } from '../errorCodes.js';
import { errorSchema } from './schemas.js';

export interface RouteDoc {
  method: 'GET' | 'POST';
  /** Fastify syntax: `/api/tasks/:taskId`. */
  url: string;
  summary: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The 200 response: a schema, or a media type with a description (SSE, HTML). */
  response: z.ZodType | { mediaType: string; description: string };
  /** Error codes this route answers with, by HTTP status. */
  errors?: Record<number, readonly HttpErrorCode[]>;
}

export function openApiDocument(
  routes: readonly RouteDoc[],
  prefix: string,
  info: { title: string; version: string },
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = `${prefix}${route.url}`.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters = [...objectParameters(route.params, 'path'), ...objectParameters(route.query, 'query')];
    const responses: Record<string, unknown> = {
      200:
        'mediaType' in route.response
          ? { description: route.response.description, content: { [route.response.mediaType]: {} } }
          : { description: 'OK', content: { 'application/json': { schema: jsonSchema(route.response) } } },
    };
    for (const [status, codes] of Object.entries({ 401: ['unauthenticated'], ...route.errors })) {
      responses[status] = {
        description: codes.join(', '),
        content: { 'application/json': { schema: jsonSchema(errorSchema) } },
      };
    }
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = {
      summary: route.summary,
      ...(parameters.length ? { parameters } : {}),
      ...(route.body
        ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } } }
        : {}),
      responses,
    };
  }
  return { openapi: '3.1.0', info, paths };
}

function jsonSchema(schema: z.ZodType): unknown {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
}

function objectParameters(schema: z.ZodObject | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return [];
  const json = jsonSchema(schema) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    schema: property,
  }));
}
