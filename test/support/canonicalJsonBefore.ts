/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no insignificant whitespace, numbers as ECMAScript
 * prints them (the JCS rules of RFC 8785 for the values this library handles). Two argument objects that mean the
 * same thing give the same text, so a hash of it can bind a confirmation or an idempotency key to exact arguments.
 *
 * Throws `TypeError` for values JSON cannot represent (undefined, functions, non-finite numbers, Dates, cycles):
 * silently dropping them would let the hashed and the executed arguments differ.
 *
 * It runs several times in every round (arguments, observations, fingerprints), so it writes the text as it goes:
 * no array of parts per object, keys sorted only when they are not in order already (JSON the model or a tool
 * sends often is), and the objects being written kept as a stack (the nesting is shallow) instead of a set.
 */
export function canonicalJson(value: unknown): string {
  return write(value, []);
}

function write(value: unknown, ancestors: object[]): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: ${value} is not representable in JSON`);
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw new TypeError(`canonicalJson: a ${typeof value} is not representable in JSON`);
  }
  const object = value as object;
  if (ancestors.includes(object)) throw new TypeError('canonicalJson: the value contains a cycle');
  ancestors.push(object);
  let out: string;
  if (Array.isArray(object)) {
    out = '[';
    for (let i = 0; i < object.length; i++) {
      if (i > 0) out += ',';
      // A hole is written as nothing, as `Array.prototype.join` writes it.
      if (i in object) out += write(object[i], ancestors);
    }
    out += ']';
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      throw new TypeError(`canonicalJson: a ${object.constructor?.name ?? 'non-plain'} object is not plain JSON`);
    }
    const keys = Object.keys(object);
    if (!inOrder(keys)) keys.sort();
    out = '{';
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const item = (object as Record<string, unknown>)[key];
      if (item === undefined) throw new TypeError(`canonicalJson: key ${JSON.stringify(key)} is undefined`);
      if (i > 0) out += ',';
      out += `${JSON.stringify(key)}:${write(item, ancestors)}`;
    }
    out += '}';
  }
  ancestors.pop();
  return out;
}

/** Whether `keys` are sorted as `Array.prototype.sort` sorts strings (by UTF-16 code units). */
function inOrder(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1]! > keys[i]!) return false;
  return true;
}
