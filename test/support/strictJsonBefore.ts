/**
 * A JSON parser for untrusted text (model tool-call arguments) that refuses what `JSON.parse` silently accepts:
 * duplicate keys (where `JSON.parse` keeps the last value, so what is audited and what runs could differ),
 * excessive nesting, and non-object roots when an object is required. Errors name the offset and the problem.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export type StrictJsonResult =
  | { ok: true; value: Json }
  | { ok: false; code: 'malformed_json' | 'duplicate_key' | 'too_deep'; message: string; offset: number };

const MAX_DEPTH = 64;

class StrictJsonError extends Error {
  constructor(
    readonly code: 'malformed_json' | 'duplicate_key' | 'too_deep',
    message: string,
    readonly offset: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Parses JSON text, rejecting duplicate keys and nesting deeper than 64 levels. Never throws. */
export function parseStrictJson(text: string): StrictJsonResult {
  const parser = new Parser(text);
  try {
    parser.skipWhitespace();
    const value = parser.value(0);
    parser.skipWhitespace();
    if (!parser.atEnd()) parser.fail('unexpected text after the JSON value');
    return { ok: true, value };
  } catch (error) {
    if (error instanceof StrictJsonError) {
      return { ok: false, code: error.code, message: error.message, offset: error.offset };
    }
    throw error;
  }
}

class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  fail(problem: string, code: 'malformed_json' | 'duplicate_key' | 'too_deep' = 'malformed_json'): never {
    throw new StrictJsonError(code, `${problem} at offset ${this.pos}`, this.pos);
  }

  skipWhitespace(): void {
    while (this.pos < this.text.length) {
      const c = this.text.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else break;
    }
  }

  value(depth: number): Json {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH} levels`, 'too_deep');
    const c = this.text[this.pos];
    switch (c) {
      case '{':
        return this.object(depth);
      case '[':
        return this.array(depth);
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      case undefined:
        return this.fail('unexpected end of input');
      default:
        if (c === '-' || (c >= '0' && c <= '9')) return this.number();
        return this.fail(`unexpected character ${JSON.stringify(c)}`);
    }
  }

  private literal<T extends Json>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.pos)) this.fail(`invalid literal, expected ${word}`);
    this.pos += word.length;
    return value;
  }

  private object(depth: number): JsonObject {
    this.pos++; // {
    const result: JsonObject = {};
    const seen = new Set<string>();
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return result;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.pos] !== '"') this.fail('expected a string key');
      const keyOffset = this.pos;
      const key = this.string();
      if (seen.has(key)) {
        this.pos = keyOffset;
        this.fail(`duplicate key ${JSON.stringify(key)}`, 'duplicate_key');
      }
      seen.add(key);
      this.skipWhitespace();
      if (this.text[this.pos] !== ':') this.fail("expected ':' after a key");
      this.pos++;
      this.skipWhitespace();
      const item = this.value(depth + 1);
      // defineProperty keeps "__proto__" an own data property, as JSON.parse does.
      Object.defineProperty(result, key, { value: item, enumerable: true, writable: true, configurable: true });
      this.skipWhitespace();
      const next = this.text[this.pos];
      if (next === ',') {
        this.pos++;
        continue;
      }
      if (next === '}') {
        this.pos++;
        return result;
      }
      this.fail("expected ',' or '}' in an object");
    }
  }

  private array(depth: number): Json[] {
    this.pos++; // [
    const result: Json[] = [];
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return result;
    }
    for (;;) {
      this.skipWhitespace();
      result.push(this.value(depth + 1));
      this.skipWhitespace();
      const next = this.text[this.pos];
      if (next === ',') {
        this.pos++;
        continue;
      }
      if (next === ']') {
        this.pos++;
        return result;
      }
      this.fail("expected ',' or ']' in an array");
    }
  }

  private string(): string {
    const start = this.pos;
    this.pos++; // opening quote
    let out = '';
    let chunkStart = this.pos;
    for (;;) {
      if (this.pos >= this.text.length) {
        this.pos = start;
        this.fail('unterminated string');
      }
      const c = this.text.charCodeAt(this.pos);
      if (c === 0x22) {
        out += this.text.slice(chunkStart, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) this.fail('unescaped control character in a string');
      if (c === 0x5c) {
        out += this.text.slice(chunkStart, this.pos);
        out += this.escape();
        chunkStart = this.pos;
        continue;
      }
      this.pos++;
    }
  }

  private escape(): string {
    const c = this.text[this.pos + 1];
    this.pos += 2;
    switch (c) {
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '/':
        return '/';
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'u': {
        const hex = this.text.slice(this.pos, this.pos + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('invalid \\u escape');
        this.pos += 4;
        return String.fromCharCode(parseInt(hex, 16));
      }
      default:
        this.pos -= 2;
        return this.fail('invalid escape sequence');
    }
  }

  private number(): number {
    const match = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(this.text.slice(this.pos, this.pos + 400));
    if (!match) this.fail('invalid number');
    const value = Number(match[0]);
    if (!Number.isFinite(value)) this.fail('number out of range');
    this.pos += match[0].length;
    return value;
  }
}

/** True for a plain JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** UTF-8 byte length of a string, without allocating (lone surrogates count as the 3-byte replacement). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
