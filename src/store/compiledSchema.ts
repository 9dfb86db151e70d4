/**
 * A fast path for validating stored envelopes: zod's schema compiler (`z.compile`) turns a schema into generated
 * code that checks a stored snapshot several times faster than the interpreting parser, which matters on resume
 * (measured: ~300 µs of a 2.3 ms resume went to the interpreter). The compiler refuses schemas that contain a
 * cycle, and the envelope has two: arbitrary JSON (`z.json()`) and XState's nested state value. So the envelope
 * schema is rebuilt with each of those replaced by a hand-written stand-in that checks and copies the same values
 * without recursion in the schema, and the result is compiled.
 *
 * The fast path only ever says "valid, here is the value": when it refuses, the caller runs the original schema,
 * so every error message is the interpreter's own. A stand-in may therefore be stricter than what it replaces
 * (its refusals cost a second parse, never a wrong answer), never looser.
 */
import { z } from 'zod';
import type { Json } from '../../machines/context.js';

type Schema = z.core.$ZodType;
type Parse = (value: unknown) => { success: true; data: unknown } | { success: false };

/**
 * `schema` rebuilt with every node found in `replace` swapped for its stand-in. Nodes are rebuilt with their own
 * definitions (checks, defaults, messages) and only their children changed. Throws for a kind of node it does not
 * know how to rebuild, so that a schema that grows one is noticed (the caller then keeps the interpreter).
 */
export function withStandIns(schema: Schema, replace: ReadonlyMap<Schema, Schema>): Schema {
  const done = new Map<Schema, Schema>();
  const rebuild = (node: Schema): Schema => {
    const standIn = replace.get(node);
    if (standIn) return standIn;
    const known = done.get(node);
    if (known) return known;
    const def = node._zod.def as unknown as Record<string, unknown> & { type: string };
    const changes: Record<string, unknown> = {};
    const child = (key: string) => {
      const inner = def[key] as Schema | undefined;
      if (inner === undefined) return;
      const next = rebuild(inner);
      if (next !== inner) changes[key] = next;
    };
    switch (def.type) {
      case 'string':
      case 'number':
      case 'boolean':
      case 'null':
      case 'literal':
      case 'enum':
      case 'never':
      case 'unknown':
        break;
      case 'object': {
        const shape = def.shape as Record<string, Schema>;
        const next = Object.fromEntries(Object.entries(shape).map(([key, value]) => [key, rebuild(value)]));
        if (Object.keys(shape).some((key) => next[key] !== shape[key])) changes.shape = next;
        child('catchall');
        break;
      }
      case 'array':
        child('element');
        break;
      case 'optional':
      case 'nullable':
      case 'default':
        child('innerType');
        break;
      case 'record':
        child('keyType');
        child('valueType');
        break;
      case 'union': {
        const options = def.options as Schema[];
        const next = options.map(rebuild);
        if (next.some((option, i) => option !== options[i])) changes.options = next;
        break;
      }
      default:
        throw new Error(`cannot rebuild a ${def.type} schema`);
    }
    let rebuilt = node;
    if (Object.keys(changes).length > 0) {
      // The definition's own accessors (a default's value is a getter that copies it per parse) are kept as they are.
      const nextDef = Object.defineProperties({}, Object.getOwnPropertyDescriptors(def));
      for (const [key, value] of Object.entries(changes))
        Object.defineProperty(nextDef, key, { value, enumerable: true, writable: true, configurable: true });
      rebuilt = z.clone(node, nextDef as never);
    }
    done.set(node, rebuilt);
    return rebuilt;
  };
  return rebuild(schema);
}

/**
 * The compiled fast path of `schema` with the stand-ins, or null where the compiler is unavailable (no
 * `new Function`, a node the compiler refuses): then the interpreter alone is used.
 */
export function compiledParse(schema: Schema, replace: ReadonlyMap<Schema, Schema>): Parse | null {
  try {
    // The generated function itself, not `z.compile`'s schema: on INVALID that one runs zod's runtime over the rebuilt
    // schema for its errors, which the caller never shows (it runs the original schema next), so a refused read paid
    // for the interpreter twice. compileFn throws where `z.compile(…, { strict: true })` would.
    const compiled = z.core.compileFn(withStandIns(schema, replace));
    return (value) => {
      const out = compiled(value);
      return out === z.INVALID ? { success: false } : { success: true, data: out };
    };
  } catch {
    return null;
  }
}

/** Not a JSON value (the copy refuses). */
const REFUSED = Symbol('refused');

/**
 * A copy of `value` if it is what `z.json()` accepts (strings, finite numbers, booleans, null, arrays and plain
 * objects of those), as `z.json()` would return it; REFUSED otherwise, and also for the corner cases `z.json()`
 * treats specially (a `__proto__` key, symbol keys, objects of another class), which are left to the interpreter.
 */
function jsonCopy(value: unknown, depth: number): Json | typeof REFUSED {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : REFUSED;
    case 'object': {
      if (value === null) return null;
      if (depth > 200) return REFUSED;
      if (Array.isArray(value)) {
        const out: Json[] = new Array(value.length);
        for (let i = 0; i < value.length; i++) {
          const item = jsonCopy(value[i], depth + 1);
          if (item === REFUSED) return REFUSED;
          out[i] = item;
        }
        return out;
      }
      const entries = plainEntries(value);
      if (!entries) return REFUSED;
      const out: Record<string, Json> = {};
      for (const [key, inner] of entries) {
        const item = jsonCopy(inner, depth + 1);
        if (item === REFUSED) return REFUSED;
        out[key] = item;
      }
      return out;
    }
    default:
      return REFUSED;
  }
}

/** The entries of a plain object with nothing the interpreter treats specially; null otherwise. */
function plainEntries(value: object): [string, unknown][] | null {
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return null;
  if (Object.getOwnPropertySymbols(value).length > 0 || Object.hasOwn(value, '__proto__')) return null;
  return Object.entries(value);
}

/** The state value XState persists: a state name, or an object of nested state values (a copy, or REFUSED). */
function stateValueCopy(value: unknown, depth: number): string | Record<string, unknown> | typeof REFUSED {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null || Array.isArray(value) || depth > 200) return REFUSED;
  const entries = plainEntries(value);
  if (!entries) return REFUSED;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of entries) {
    const item = stateValueCopy(inner, depth + 1);
    if (item === REFUSED) return REFUSED;
    out[key] = item;
  }
  return out;
}

/** A schema that accepts what `copy` copies, giving the copy. Its refusal message is never shown (see above). */
function standIn<T>(copy: (value: unknown, depth: number) => T | typeof REFUSED): Schema {
  return z.unknown().transform((value, ctx) => {
    const out = copy(value, 0);
    if (out !== REFUSED) return out;
    ctx.issues.push({ code: 'custom', input: value, message: 'left to the full parse' });
    return z.NEVER;
  });
}

/**
 * Stand-in that runs `schema` on the interpreter: for parts that are large to compile and mostly null or empty in a
 * stored task (plans, outcomes, sub-tasks), where generated code would cost more to build than it saves.
 */
export function interpreted(schema: Schema): Schema {
  return z.unknown().transform((value, ctx) => {
    const parsed = z.safeParse(schema, value);
    if (parsed.success) return parsed.data;
    ctx.issues.push({ code: 'custom', input: value, message: 'left to the full parse' });
    return z.NEVER;
  });
}

/** Stand-in for `z.json()`. */
export const jsonStandIn = standIn(jsonCopy);
/** Stand-in for the recursive union of a state name and a record of nested state values. */
export const stateValueStandIn = standIn(stateValueCopy);
