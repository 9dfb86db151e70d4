/**
 * Sensitive data kept out of everything a task persists or streams. Values enter a task in a few places only (the
 * goal and the users' text, the model's output, tools' results, hooks' summaries); each is sealed there, before the
 * chart sees it, so the snapshot, the journals, the inspection streams, traces, logs and the model's conversation
 * hold tokens such as `[[sealed:card-1111:…]]` instead. Two things mark a value sensitive:
 *
 * - a tool's declared fields (`sensitive: { args, output }`): the whole value at that path is sealed;
 * - the host's redactors (`cardNumbers()`...): every match in any text is sealed in place.
 *
 * A token is opened only where a tool declared it takes a sensitive value (its `sensitive.args` paths), right before
 * its hooks or `execute` run, and only by the task that sealed it. Anywhere else it stays text.
 */
import type { Json } from '../../machines/context.js';
import { parseStrictJson } from '../../machines/lib/strictJson.js';
import { AgentError } from '../errors.js';
import type { Redactor } from './redactors.js';
import { type Sealer, memorySealer } from './sealer.js';
import { type SealScope, TOKEN, WHOLE_TOKEN, labelOf, leadsBelow, leaves, matches, ownerOf, pathLabel, splitPath, tokenText } from './tokens.js';

export { displayText, type SealScope } from './tokens.js';

export interface PrivacyOptions {
  /** How sealed values are kept: `memorySealer()` (default; lost on restart) or `keyedSealer({ key })` (durable). */
  sealer?: Sealer;
  /** Patterns sealed wherever they occur in text (e.g. `cardNumbers()`, `emailAddresses()`). */
  redactors?: Redactor[];
}

/** Paths of a tool's sensitive fields: dotted, `*` for any array element or key ("card.number", "items.*.iban"). */
export type SensitivePaths = readonly string[];

/** A token a call opened, and the value it stood for. */
export interface OpenedToken {
  token: string;
  value: Json;
}

/** A value at a sensitive path that could not be opened: why, and where. */
export interface SealFailure {
  path: string;
  label: string;
  reason: 'unavailable' | 'other_task';
}

/** Values shorter than this are not searched for in text (they would match everywhere). */
const SHORTEST_ECHO = 3;
/** Blobs verified as this task's, remembered (a keyed sealer's check is a decryption). */
const VERIFIED_CACHE = 4_096;

export class Privacy {
  readonly sealer: Sealer;
  private readonly redactors: readonly Redactor[];
  private readonly verified = new Map<string, string>();

  constructor(options: PrivacyOptions = {}) {
    this.sealer = options.sealer ?? memorySealer();
    this.redactors = (options.redactors ?? []).map(checkRedactor);
  }

  /** True when free text needs a pass (the host has redactors). */
  get redacts(): boolean {
    return this.redactors.length > 0;
  }

  /**
   * `text` with every redactor match sealed. A token of this task in it is kept; anything else shaped like a token
   * is text like the rest (a value wrapped in `[[sealed:…]]` by someone else is still found).
   */
  text(scope: SealScope, text: string): string {
    if (this.redactors.length === 0 || text === '') return text;
    let out = '';
    let last = 0;
    for (const token of text.matchAll(TOKEN)) {
      if (!this.isOwn(scope, token[2]!)) continue;
      out += this.redactPlain(scope, text.slice(last, token.index));
      out += token[0];
      last = token.index + token[0].length;
    }
    return out + this.redactPlain(scope, text.slice(last));
  }

  /**
   * `value` with the values at `paths` sealed whole, every string (and object key, and long integer) redacted, and
   * every value a call `opened` sealed again wherever the value quotes it. Returns `value` itself when nothing
   * changed.
   */
  json<T extends Json>(scope: SealScope, value: T, paths: SensitivePaths = [], opened: readonly OpenedToken[] = []): T {
    if (paths.length === 0 && this.redactors.length === 0 && opened.length === 0) return value;
    return this.walk(scope, value, paths.map(splitPath), [], echoList(opened)) as T;
  }

  /**
   * A string of JSON arguments from the model, sealed. Without sensitive paths the text is redacted as it is (its
   * bytes, duplicate keys included, stay for the protocol gate). With them, only arguments that parse strictly to an
   * object are kept (re-serialized, the values at the paths sealed); anything else is withheld whole as one token,
   * which the protocol gate refuses as malformed: a value can hide in a duplicate key or in text that is not JSON.
   */
  arguments(scope: SealScope, raw: string, paths: SensitivePaths): string {
    if (paths.length === 0) return this.text(scope, raw);
    const parsed = parseStrictJson(raw);
    if (!parsed.ok || parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) return this.withheld(scope, 'arguments', raw);
    return JSON.stringify(this.json(scope, parsed.value, paths));
  }

  /** `text` kept as one token (it may hold a sensitive value nobody can point to). */
  withheld(scope: SealScope, label: string, text: string): string {
    return this.token(scope, labelOf(label), JSON.stringify(text));
  }

  /**
   * The values at `paths` opened (as the tool needs them), when the tokens there are this task's. A path whose value
   * is not a token is left as it is.
   */
  open(value: Json, paths: SensitivePaths, scope: SealScope): { ok: true; value: Json; opened: OpenedToken[] } | { ok: false; failure: SealFailure } {
    if (paths.length === 0) return { ok: true, value, opened: [] };
    const owner = ownerOf(scope);
    let failure: SealFailure | null = null;
    const tokens: OpenedToken[] = [];
    const opened = mapAt(value, paths.map(splitPath), [], (leaf, path) => {
      if (failure || typeof leaf !== 'string') return leaf;
      const token = WHOLE_TOKEN.exec(leaf);
      if (!token) return leaf;
      const found = this.sealer.open(token[2]!);
      if (!found || found.owner !== owner) {
        failure = { path: path.join('.'), label: token[1]!, reason: found ? 'other_task' : 'unavailable' };
        return leaf;
      }
      const plain = JSON.parse(found.plaintext) as Json;
      tokens.push({ token: leaf, value: plain });
      return plain;
    });
    return failure ? { ok: false, failure } : { ok: true, value: opened, opened: tokens };
  }

  /**
   * Validated arguments sealed again at `paths`: a value equal to one the call opened gets its very token back (so
   * its label, e.g. `card-1111`, stays what the approver is shown), anything else a new one.
   */
  reseal(scope: SealScope, value: Json, paths: SensitivePaths, opened: readonly OpenedToken[]): Json {
    const split = paths.map(splitPath);
    return mapAt(value, split, [], (leaf, at) => {
      const same = opened.find((o) => jsonEqual(o.value, leaf));
      return same ? same.token : this.sealWhole(scope, leaf, split.find((p) => matches(p, at)) ?? at);
    });
  }

  /**
   * `text` (a hook's or a tool's summary) with every value a call opened sealed again as its token wherever it is
   * quoted (its string and number leaves, longest first, short ones only as whole words, whitespace runs matched
   * loosely), then redacted: a hook that quotes the value it was given does not leak it.
   */
  echoes(scope: SealScope, text: string, opened: readonly OpenedToken[]): string {
    return this.text(scope, replaceEchoes(text, echoList(opened)));
  }

  private walk(scope: SealScope, value: Json, paths: string[][], at: string[], echoes: Echo[]): Json {
    const declared = paths.find((path) => matches(path, at));
    if (declared) return this.sealWhole(scope, value, declared);
    if (typeof value === 'string') return this.text(scope, echoes.length ? replaceEchoes(value, echoes) : value);
    if (typeof value === 'number') return this.redactNumber(scope, value);
    if (Array.isArray(value)) {
      let changed = false;
      const next = value.map((item, index) => {
        const sealed = this.walk(scope, item, paths, [...at, String(index)], echoes);
        if (sealed !== item) changed = true;
        return sealed;
      });
      return changed ? next : value;
    }
    if (value !== null && typeof value === 'object') {
      let changed = false;
      const next: Record<string, Json> = {};
      for (const [key, item] of Object.entries(value)) {
        // A key can be the secret too ({ "4111…": 100 }): redacted like any text; paths match the key as it was.
        const sealedKey = this.text(scope, echoes.length ? replaceEchoes(key, echoes) : key);
        const sealed = this.walk(scope, item, paths, [...at, key], echoes);
        if (sealed !== item || sealedKey !== key) changed = true;
        next[sealedKey] = sealed;
      }
      return changed ? next : value;
    }
    return value;
  }

  private sealWhole(scope: SealScope, value: Json, declared: readonly string[]): Json {
    if (value === null) return value;
    if (typeof value === 'string') {
      const token = WHOLE_TOKEN.exec(value);
      if (token && this.isOwn(scope, token[2]!)) return value;
    }
    return this.token(scope, pathLabel(declared), JSON.stringify(value));
  }

  /** An integer long enough to be a card or an account number is redacted as its digits would be. */
  private redactNumber(scope: SealScope, value: number): Json {
    if (this.redactors.length === 0 || !Number.isInteger(value) || Math.abs(value) < 1e9) return value;
    const digits = String(value);
    for (const redactor of this.redactors) {
      redactor.pattern.lastIndex = 0;
      const match = redactor.pattern.exec(digits);
      redactor.pattern.lastIndex = 0;
      if (match && match[0] === digits && (!redactor.accept || redactor.accept(digits))) {
        return this.token(scope, labelOf(redactor.label?.(digits) ?? redactor.name), JSON.stringify(value));
      }
    }
    return value;
  }

  private redactPlain(scope: SealScope, text: string): string {
    let out = text;
    for (const redactor of this.redactors) {
      out = out.replace(redactor.pattern, (match) => {
        if (redactor.accept && !redactor.accept(match)) return match;
        return this.token(scope, labelOf(redactor.label?.(match) ?? redactor.name), JSON.stringify(match));
      });
    }
    return out;
  }

  private token(scope: SealScope, label: string, plaintext: string): string {
    const owner = ownerOf(scope);
    const blob = this.sealer.seal(owner, plaintext);
    this.remember(blob, owner);
    return tokenText(label, blob);
  }

  /** True when `blob` is a sealed value of this task. */
  private isOwn(scope: SealScope, blob: string): boolean {
    const owner = ownerOf(scope);
    const known = this.verified.get(blob);
    if (known !== undefined) return known === owner;
    const found = this.sealer.open(blob);
    if (!found) return false;
    this.remember(blob, found.owner);
    return found.owner === owner;
  }

  private remember(blob: string, owner: string): void {
    if (this.verified.size >= VERIFIED_CACHE) this.verified.clear();
    this.verified.set(blob, owner);
  }
}

interface Echo {
  value: string;
  token: string;
  pattern: RegExp | null;
}

/** What to look for in text: each opened value's leaves, longest first. */
function echoList(opened: readonly OpenedToken[]): Echo[] {
  const list: Echo[] = [];
  for (const { token, value } of opened) {
    for (const leaf of leaves(value)) {
      if (leaf.length < SHORTEST_ECHO) continue;
      const escaped = leaf.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\s+/g, '\\s+');
      const loose = /\s/.test(leaf) || leaf.length < 6;
      list.push({ value: leaf, token, pattern: loose ? new RegExp(leaf.length < 6 ? `(?<![A-Za-z0-9])${escaped}(?![A-Za-z0-9])` : escaped, 'g') : null });
    }
  }
  return list.sort((a, b) => b.value.length - a.value.length);
}

function replaceEchoes(text: string, echoes: readonly Echo[]): string {
  let out = text;
  for (const echo of echoes) out = echo.pattern ? out.replace(echo.pattern, echo.token) : out.split(echo.value).join(echo.token);
  return out;
}

function jsonEqual(a: Json, b: Json): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function checkRedactor(redactor: Redactor): Redactor {
  if (!redactor || typeof redactor.name !== 'string' || !(redactor.pattern instanceof RegExp)) {
    throw new AgentError('invalid_redactor', 'a redactor needs a name and a pattern (a RegExp)');
  }
  if (!redactor.pattern.global) throw new AgentError('invalid_redactor', `redactor ${redactor.name}: its pattern must be global (the g flag)`);
  return redactor;
}

/** `value` with each leaf at one of `paths` replaced by `change` (structure shared where nothing changed). */
function mapAt(value: Json, paths: string[][], at: string[], change: (leaf: Json, path: string[]) => Json): Json {
  if (paths.some((path) => matches(path, at))) return change(value, at);
  if (!leadsBelow(paths, at)) return value;
  if (Array.isArray(value)) return value.map((item, index) => mapAt(item, paths, [...at, String(index)], change));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapAt(item, paths, [...at, key], change)]));
  }
  return value;
}
