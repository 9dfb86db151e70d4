/**
 * An MCP tool's input schema as the schema gate needs it: a strict zod object, converted from the server's JSON
 * Schema with zod 4's `z.fromJSONSchema` when the host gives none.
 *
 * The server's schema is untrusted text shown to the model and a rule the gate enforces, so before converting it:
 * objects are made strict (an absent, `true` or `{}` `additionalProperties` becomes `false`: unknown fields are
 * refused, not passed on); a top level that admits extra fields by schema is refused; defaults are dropped (the gate
 * requires arguments that parse to themselves, and the server applies its own); descriptions and titles are capped;
 * `examples` are dropped. A schema too large or one zod cannot convert is refused with a message naming the tool:
 * the host then writes the `input` itself.
 */
import { z } from 'zod';
import { McpPolicyError } from '../errors.js';

const MAX_SCHEMA_BYTES = 64 * 1024;
const MAX_TEXT = 300;
const MAX_DEPTH = 32;

type JsonSchema = Record<string, unknown>;

/** The strict zod input for an MCP tool, from its server's JSON Schema, without `omit` (e.g. a key argument). */
export function inputFromJsonSchema(mcpName: string, inputSchema: unknown, omit?: string): z.ZodType {
  const fail = (detail: string): never => {
    throw new McpPolicyError(mcpName, `${detail}; give its policy an \`input\` (a z.strictObject)`);
  };
  if (!isObject(inputSchema) || inputSchema.type !== 'object')
    return fail("the server's input schema is not an object schema");
  if (Buffer.byteLength(JSON.stringify(inputSchema)) > MAX_SCHEMA_BYTES)
    return fail(`the server's input schema is larger than ${MAX_SCHEMA_BYTES} bytes`);
  const top = structuredClone(inputSchema);
  if (isObject(top.additionalProperties) && Object.keys(top.additionalProperties).length > 0) {
    return fail("the server's input schema accepts extra fields by a schema (additionalProperties)");
  }
  if (top.patternProperties !== undefined)
    return fail("the server's input schema accepts fields by pattern (patternProperties)");
  if (omit !== undefined) {
    if (isObject(top.properties)) delete top.properties[omit];
    if (Array.isArray(top.required)) top.required = top.required.filter((field) => field !== omit);
  }
  // z.fromJSONSchema arrived in zod 4.2; the peer range starts at 4.0.
  const convert = (z as { fromJSONSchema?: typeof z.fromJSONSchema }).fromJSONSchema;
  if (typeof convert !== 'function')
    return fail(`converting the server's input schema needs zod 4.2 or later (z.fromJSONSchema)`);
  try {
    return convert(tighten(top, 0) as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    return fail(`the server's input schema cannot be converted (${String((error as Error).message).split('\n')[0]})`);
  }
}

/** A copy of a JSON Schema (sub)tree, strict and with capped text, as the module comment says. */
function tighten(node: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH) throw new Error('the schema nests too deeply');
  if (Array.isArray(node)) return node.map((item) => tighten(item, depth + 1));
  if (!isObject(node)) return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'default' || key === 'examples') continue;
    if ((key === 'description' || key === 'title') && typeof value === 'string') {
      out[key] = capText(value);
    } else if (key === 'properties' || key === '$defs' || key === 'definitions' || key === 'patternProperties') {
      // Maps of names to schemas: the names are data, the values are schemas.
      out[key] = isObject(value)
        ? Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, tighten(schema, depth + 1)]))
        : value;
    } else {
      out[key] = tighten(value, depth + 1);
    }
  }
  const isObjectSchema = out.type === 'object' || (out.type === undefined && isObject(out.properties));
  if (isObjectSchema && out.patternProperties === undefined) {
    const extra = out.additionalProperties;
    if (extra === undefined || extra === true || (isObject(extra) && Object.keys(extra).length === 0))
      out.additionalProperties = false;
  }
  return out;
}

function capText(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_TEXT ? `${line.slice(0, MAX_TEXT)}…` : line;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
