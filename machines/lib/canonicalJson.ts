/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no insignificant whitespace, numbers as ECMAScript
 * prints them (the JCS rules of RFC 8785 for the values this library handles). Two argument objects that mean the
 * same thing give the same text, so a hash of it can bind a confirmation or an idempotency key to exact arguments.
 *
 * Throws `TypeError` for values JSON cannot represent (undefined, functions, non-finite numbers, Dates, cycles):
 * silently dropping them would let the hashed and the executed arguments differ.
 */
export function canonicalJson(value: unknown): string {
  return write(value, new Set());
}

function write(value: unknown, ancestors: Set<object>): string {
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
  if (ancestors.has(object)) throw new TypeError('canonicalJson: the value contains a cycle');
  ancestors.add(object);
  let out: string;
  if (Array.isArray(object)) {
    out = `[${object.map((item) => write(item, ancestors)).join(',')}]`;
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      throw new TypeError(`canonicalJson: a ${object.constructor?.name ?? 'non-plain'} object is not plain JSON`);
    }
    const keys = Object.keys(object).sort();
    const parts: string[] = [];
    for (const key of keys) {
      const item = (object as Record<string, unknown>)[key];
      if (item === undefined) throw new TypeError(`canonicalJson: key ${JSON.stringify(key)} is undefined`);
      parts.push(`${JSON.stringify(key)}:${write(item, ancestors)}`);
    }
    out = `{${parts.join(',')}}`;
  }
  ancestors.delete(object);
  return out;
}
