/**
 * The service's `application/json` body parser, in place of Fastify's own within the plugin (the host's app keeps
 * its parser). It refuses the same bodies, for the same reasons, and says which: Fastify's parser answers a body
 * that holds a `__proto__` key with the same error as a syntax error, and drops the reason.
 *
 * A key that could change an object's prototype when the body is merged or copied (prototype poisoning) is refused,
 * never removed: an own `__proto__` key, or a `constructor` key whose value is an object with a `prototype` key, at
 * any depth. These are the rules of Fastify's parser (secure-json-parse) with `onProtoPoisoning` and
 * `onConstructorPoisoning` at their default, `'error'`. A body that is too large, empty or not JSON is answered as
 * before (the route's `bodyLimit` still applies: Fastify reads the body before the parser sees it).
 */
import type { FastifyInstance } from 'fastify';
import { type ServiceError, serviceError } from './serviceError.js';

/** Replaces Fastify's JSON parser in `app`'s scope (the plugin's: the host's own routes keep Fastify's). */
export function registerJsonParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const parsed = parseJsonBody(body as string);
    if (parsed.ok) done(null, parsed.value);
    else done(parsed.error, undefined);
  });
}

/** The body as a value, or the refusal the service answers with. Never throws. */
export function parseJsonBody(text: string): { ok: true; value: unknown } | { ok: false; error: ServiceError } {
  if (text.length === 0) return { ok: false, error: serviceError(400, 'invalid_request', 'the JSON body is empty') };
  let value: unknown;
  try {
    // A leading byte order mark is skipped, as Fastify's parser does.
    value = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    // Not the parser's message: it quotes the body back.
    return { ok: false, error: serviceError(400, 'invalid_json', 'the body is not valid JSON') };
  }
  const key = forbiddenKey(value);
  if (key === null) return { ok: true, value };
  return {
    ok: false,
    error: serviceError(
      400,
      'forbidden_json_key',
      `the body's key ${key} is refused for safety: ${
        key.endsWith('__proto__') ? 'a "__proto__" key' : 'a "constructor" object with a "prototype" key'
      } could change the prototype of an object it is merged into (prototype poisoning); remove it`,
    ),
  };
}

/** Longest path a message names; past it, its end is cut (the key itself is always named last). */
const MAX_PATH = 200;

/**
 * The path of the first key that could poison a prototype (`__proto__`, `input.items[0].constructor.prototype`),
 * breadth first as secure-json-parse looks, or null. Iterative: a deeply nested body costs no stack.
 */
function forbiddenKey(value: unknown): string | null {
  type Node = { value: object; parent: Node | null; step: string };
  if (value === null || typeof value !== 'object') return null;
  let level: Node[] = [{ value, parent: null, step: '' }];
  while (level.length > 0) {
    const next: Node[] = [];
    for (const node of level) {
      const object = node.value as Record<string, unknown>;
      if (Object.hasOwn(object, '__proto__')) return pathOf(node, '__proto__');
      const made = Object.hasOwn(object, 'constructor') ? object.constructor : undefined;
      if (made !== null && typeof made === 'object' && Object.hasOwn(made, 'prototype'))
        return pathOf(node, 'constructor.prototype');
      const isArray = Array.isArray(object);
      for (const key of Object.keys(object)) {
        const child = object[key];
        if (child !== null && typeof child === 'object')
          next.push({ value: child, parent: node, step: isArray ? `[${key}]` : stepOf(key) });
      }
    }
    level = next;
  }
  return null;
}

function stepOf(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function pathOf(node: { parent: unknown; step: string }, key: string): string {
  let path = '';
  for (let at: typeof node | null = node; at; at = at.parent as typeof node | null) path = at.step + path;
  path = path.replace(/^\./, '');
  if (path.length > MAX_PATH) path = `${path.slice(0, MAX_PATH)}...`;
  return path ? `${path}.${key}` : key;
}
