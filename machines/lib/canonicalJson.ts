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
  // Most values are canonical as they stand (keys in order, nothing JSON cannot say): then `JSON.stringify` writes the
  // same text, in one flat string, where `write` joins a string per value (the garbage, and their flattening).
  return isCanonical(value, []) ? JSON.stringify(value) : write(value, []);
}

/**
 * Whether `JSON.stringify(value)` is already its canonical text: only null, booleans, strings, finite numbers, arrays
 * without holes and plain objects with their keys in order, no cycle, no `toJSON` anywhere (not even inherited).
 * Anything else goes to `write`, which sorts or throws as it always did.
 */
function isCanonical(value: unknown, ancestors: object[]): boolean {
  if (value === null) return true;
  switch (typeof value) {
    case 'boolean':
    case 'string':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  const object = value as object;
  if ('toJSON' in object || ancestors.includes(object)) return false;
  ancestors.push(object);
  let canonical = true;
  if (Array.isArray(object)) {
    for (let i = 0; i < object.length && canonical; i++)
      canonical = i in object && isCanonical(object[i] as unknown, ancestors);
  } else {
    const proto = Object.getPrototypeOf(object);
    canonical = proto === Object.prototype || proto === null;
    // A for-in walks the own keys in `Object.keys`' order without making the list; an inherited enumerable key (not
    // written by `JSON.stringify`) sends the value to `write`, which reads `Object.keys` as it always did.
    let previous: string | null = null;
    for (const key in object) {
      if (!canonical) break;
      if (!Object.hasOwn(object, key) || (previous !== null && previous > key)) canonical = false;
      else {
        const item = (object as Record<string, unknown>)[key];
        canonical = item !== undefined && isCanonical(item, ancestors);
      }
      previous = key;
    }
  }
  ancestors.pop();
  return canonical;
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
      if (i in object) out += written(object[i], ancestors);
    }
    out += ']';
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      throw new TypeError(`canonicalJson: a ${object.constructor?.name ?? 'non-plain'} object is not plain JSON`);
    }
    const keys = Object.keys(object);
    if (!inOrder(keys)) sortKeys(keys);
    out = '{';
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const item = (object as Record<string, unknown>)[key];
      if (item === undefined) throw new TypeError(`canonicalJson: key ${JSON.stringify(key)} is undefined`);
      if (i > 0) out += ',';
      out += `${JSON.stringify(key)}:${written(item, ancestors)}`;
    }
    out += '}';
  }
  ancestors.pop();
  return out;
}

/**
 * `write(item)`, for an item inside a value being written: an object or array that is canonical as it stands (with
 * no cycle back to `ancestors`) is written by `JSON.stringify` in one flat string, as `canonicalJson` does at the top.
 * A value whose own keys are out of order (an observation without its call id, say) thus writes its canonical parts
 * without a string per value.
 */
function written(item: unknown, ancestors: object[]): string {
  return item !== null && typeof item === 'object' && isCanonical(item, ancestors)
    ? JSON.stringify(item)
    : write(item, ancestors);
}

/**
 * Sorts `keys` in place as `Array.prototype.sort` sorts strings (by UTF-16 code units; the keys are distinct, so
 * stability does not matter). A short list is sorted by insertion: `sort` copies the list into a work array first.
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 24) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
}

/** Whether `keys` are sorted as `Array.prototype.sort` sorts strings (by UTF-16 code units). */
function inOrder(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1]! > keys[i]!) return false;
  return true;
}
