/**
 * Identity comes from the host session; an argument that names a user or a tenant would let the model choose one.
 * A field is an identity field however it is spelled (`tenant_id`, `tenantId`, `Tenant-Id` and `TENANTID` are one
 * name), and wherever it stands: at the top of a tool's input, in an object inside it, in an array's items. Two
 * checks use the list: `defineTool` over the input's JSON Schema (the fields a tool declares), and the schema gate
 * over a call's validated arguments (the keys a record or an open object let the model choose).
 *
 * Both walks are bounded, and refuse past the bound rather than skip what lies beyond it: a hostile input (a deep
 * schema from an MCP server, deep arguments from the model) costs at most the bound. They are iterative, so depth
 * costs no stack, and they name the field by its path (`customer.tenant_id`, `lines[2].user_id`), never a value.
 */

const IDENTITY_FIELDS =
  /^(requester|requesterid|requestedby|user|userid|principal|principalid|tenant|tenantid|onbehalfof|actor|actorid|employeeid|caller|callerid|scopes?|role|roles|permissions?)$/i;

/** True when `field` names an identity, however spelled (spaces, underscores and dashes removed, case ignored). */
export const isIdentityField = (field: string): boolean => IDENTITY_FIELDS.test(field.replace(/[\s_-]/g, ''));

/** Deepest nesting either walk follows: objects and arrays in arguments, subschemas in a schema. */
export const IDENTITY_CHECK_MAX_DEPTH = 32;
/** Most parts either walk visits: fields and items in arguments, subschemas in a schema. */
export const IDENTITY_CHECK_MAX_PARTS = 10_000;

/** An identity field at `path`; or the walk met its bound (`detail` says which) and checked no further. */
export type IdentityFinding = { kind: 'field'; path: string } | { kind: 'bound'; detail: string };

type Step = { parent: Step | null; step: string };

/**
 * The first identity field among the keys of `args` (plain JSON, as the schema gate validated it), at any depth
 * within the bounds.
 */
export function identityFieldInArguments(args: unknown): IdentityFinding | null {
  const stack: { value: unknown; at: Step | null; depth: number }[] = [{ value: args, at: null, depth: 0 }];
  let parts = 0;
  while (stack.length > 0) {
    const { value, at, depth } = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (depth >= IDENTITY_CHECK_MAX_DEPTH) return tooDeep('the arguments nest');
    const isArray = Array.isArray(value);
    const keys = Object.keys(value);
    parts += keys.length;
    if (parts > IDENTITY_CHECK_MAX_PARTS) return tooMany('the arguments have', 'fields and items');
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      if (!isArray && isIdentityField(key))
        return { kind: 'field', path: pathOf({ parent: at, step: fieldStep(key) }) };
      const child = (value as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object')
        stack.push({ value: child, at: { parent: at, step: isArray ? `[${key}]` : fieldStep(key) }, depth: depth + 1 });
    }
  }
  return null;
}

/**
 * The first identity field an input JSON Schema declares, at any depth within the bounds: under `properties`, in
 * `items` and `prefixItems` (`lines[].user_id`), in a record's values (`meta.*.user_id`), in `anyOf`, `oneOf`,
 * `allOf` and `if`/`then`/`else` branches, and in the `$defs` a `$ref` points to (each once, so recursion ends).
 */
export function identityFieldInSchema(root: unknown): IdentityFinding | null {
  const stack: { schema: unknown; at: Step | null; depth: number }[] = [{ schema: root, at: null, depth: 0 }];
  const followed = new Set<string>();
  let parts = 0;
  while (stack.length > 0) {
    const { schema, at, depth } = stack.pop()!;
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) continue;
    if (depth >= IDENTITY_CHECK_MAX_DEPTH) return tooDeep('the input schema nests');
    if (++parts > IDENTITY_CHECK_MAX_PARTS) return tooMany('the input schema has', 'subschemas');
    const node = schema as Record<string, unknown>;
    const push = (sub: unknown, step: string) =>
      stack.push({ schema: sub, at: step ? { parent: at, step } : at, depth: depth + 1 });
    const each = (subs: unknown, step: string) => {
      if (Array.isArray(subs)) for (let i = subs.length - 1; i >= 0; i--) push(subs[i], step);
    };
    const values = (map: unknown, step: string) => {
      if (map !== null && typeof map === 'object') for (const sub of Object.values(map)) push(sub, step);
    };
    for (const key of ['anyOf', 'oneOf', 'allOf']) each(node[key], '');
    for (const key of ['if', 'then', 'else']) push(node[key], '');
    values(node.dependentSchemas, '');
    values(node.patternProperties, '.*');
    push(node.additionalProperties, '.*');
    push(node.items, '[]');
    each(node.prefixItems, '[]');
    if (typeof node.$ref === 'string' && /^#\/(\$defs|definitions)\/[^/]+$/.test(node.$ref)) {
      const [, group, name] = node.$ref.split('/') as [string, string, string];
      const defs = (root as Record<string, unknown>)[group];
      if (!followed.has(node.$ref) && defs !== null && typeof defs === 'object' && Object.hasOwn(defs, name)) {
        followed.add(node.$ref);
        push((defs as Record<string, unknown>)[name], '');
      }
    }
    const properties = node.properties;
    if (properties !== null && typeof properties === 'object') {
      const names = Object.keys(properties);
      for (let i = names.length - 1; i >= 0; i--) {
        const name = names[i]!;
        // A schema's names are the host's (or its MCP server's): named as written, dotted.
        const step = { parent: at, step: `.${name}` };
        if (isIdentityField(name)) return { kind: 'field', path: pathOf(step) };
        push((properties as Record<string, unknown>)[name], step.step);
      }
    }
  }
  return null;
}

function tooDeep(what: string): IdentityFinding {
  return { kind: 'bound', detail: `${what} deeper than ${IDENTITY_CHECK_MAX_DEPTH} levels` };
}

function tooMany(what: string, parts: string): IdentityFinding {
  return { kind: 'bound', detail: `${what} more than ${IDENTITY_CHECK_MAX_PARTS.toLocaleString('en')} ${parts}` };
}

function fieldStep(key: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** Longest path a message names; past it, its start is cut (the identity field itself is always named). */
const MAX_PATH = 200;

function pathOf(last: Step): string {
  let path = '';
  for (let at: Step | null = last; at; at = at.parent) path = at.step + path;
  path = path.replace(/^\./, '');
  return path.length > MAX_PATH ? `...${path.slice(-MAX_PATH)}` : path;
}
