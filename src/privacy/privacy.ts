/**
 * Sensitive data kept out of everything a task persists or streams. Values enter a task in a few places only (the
 * goal and the users' text, the model's output, tools' results, hooks' summaries); each is sealed there, before the
 * chart sees it, so the snapshot, the journals, the inspection streams, traces, logs and the model's conversation
 * hold tokens such as `[[sealed:card-1111:…]]` instead. Two things mark a value sensitive:
 *
 * - a tool's declared fields (`sensitive: { args, output }`): the whole value at that path is sealed;
 * - redactors: the defaults find credentials (by key name and by shape, `secrets.ts`), the host's add patterns
 *   (`cardNumbers()`...): every match in any text is sealed in place, and every value under a key they name.
 *
 * A token is opened only where a tool declared it takes a sensitive value (its `sensitive.args` paths), right before
 * its hooks or `execute` run, and only by the task that sealed it. Anywhere else it stays text.
 */
import type { Json } from '../../machines/context.js';
import { parseStrictJson } from '../../machines/lib/strictJson.js';
import { type Echo, echoList, replaceEchoes } from './echoes.js';
import {
  type CompiledRedactor,
  type PrivacyLoosening,
  type RedactorSet,
  keyRedactorsFor,
  redactorSet,
  redactorsFor,
} from './redactorSet.js';
import type { OmitDefaultRedactors } from './redactorSet.js';
import type { Redactor } from './redactors.js';
import { type Sealer, memorySealer } from './sealer.js';
import {
  type OpenedToken,
  type SealScope,
  TOKEN,
  WHOLE_TOKEN,
  labelOf,
  leadsBelow,
  matches,
  ownerOf,
  pathLabel,
  splitPath,
  tokenText,
} from './tokens.js';

export { displayText, type OpenedToken, type SealScope } from './tokens.js';
export type { OmitDefaultRedactors, PrivacyLoosening } from './redactorSet.js';

export interface PrivacyOptions {
  /** How sealed values are kept: `memorySealer()` (default; lost on restart) or `keyedSealer({ key })` (durable). */
  sealer?: Sealer;
  /**
   * Patterns sealed wherever they occur in text (e.g. `cardNumbers()`, `emailAddresses()`), added to the default
   * redactors (credentials: `secretRedactors()`).
   */
  redactors?: Redactor[];
  /**
   * Default redactors turned off, with the reason (a loosening: listed in `Privacy.loosened`). Names from
   * `DEFAULT_REDACTOR_NAMES` or `'all'`; an unknown name or a blank reason is refused.
   */
  omitDefaultRedactors?: OmitDefaultRedactors;
}

/** Paths of a tool's sensitive fields: dotted, `*` for any array element or key ("card.number", "items.*.iban"). */
export type SensitivePaths = readonly string[];

/** A value at a sensitive path that could not be opened: why, and where. */
export interface SealFailure {
  path: string;
  label: string;
  reason: 'unavailable' | 'other_task';
}

/** Blobs verified as this task's, remembered (a keyed sealer's check is a decryption). */
const VERIFIED_CACHE = 4_096;
/** Keys known to need no sealing, remembered (short ones only: a result's keys are names, and memory stays bounded). */
const PLAIN_KEY_CACHE = 4_096;
const PLAIN_KEY_LENGTH = 64;

export class Privacy {
  readonly sealer: Sealer;
  /** The defaults the host turned off, each with its reason (empty unless `omitDefaultRedactors` was given). */
  readonly loosened: readonly PrivacyLoosening[];
  private readonly redactors: RedactorSet;
  private readonly verified = new Map<string, string>();
  private readonly plainKeys = new Set<string>();

  constructor(options: PrivacyOptions = {}) {
    this.sealer = options.sealer ?? memorySealer();
    this.redactors = redactorSet(options.redactors, options.omitDefaultRedactors);
    this.loosened = this.redactors.loosened;
  }

  /** True when free text needs a pass (some redactor runs: the defaults, unless all are omitted, or the host's). */
  get redacts(): boolean {
    return this.redactors.all.length > 0;
  }

  /** True when the host added redactors of its own (beside the defaults). */
  get hasHostRedactors(): boolean {
    return this.redactors.hostCount > 0;
  }

  /**
   * `text` with every redactor match sealed. A token of this task in it is kept; anything else shaped like a token
   * is text like the rest (a value wrapped in `[[sealed:…]]` by someone else is still found).
   */
  text(scope: SealScope, text: string): string {
    if (!this.redacts || text === '') return text;
    if (!text.includes('[[sealed:')) return this.redactPlain(scope, text);
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
    if (paths.length === 0 && !this.redacts && opened.length === 0) return value;
    return this.walk(scope, value, paths.map(splitPath), [], echoList(opened), null) as T;
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
    if (!parsed.ok || parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value))
      return this.withheld(scope, 'arguments', raw);
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
  open(
    value: Json,
    paths: SensitivePaths,
    scope: SealScope,
  ): { ok: true; value: Json; opened: OpenedToken[] } | { ok: false; failure: SealFailure } {
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

  /** `under`: the key-naming redactor and key above `value` (its strings and numbers are sealed whole). */
  private walk(
    scope: SealScope,
    value: Json,
    paths: string[][],
    at: string[],
    echoes: Echo[],
    under: Under | null,
  ): Json {
    const declared = paths.find((path) => matches(path, at));
    if (declared) return this.sealWhole(scope, value, declared);
    if (under && (typeof value === 'string' || typeof value === 'number')) return this.sealUnder(scope, value, under);
    if (typeof value === 'string') return this.text(scope, echoes.length ? replaceEchoes(value, echoes) : value);
    if (typeof value === 'number') return this.redactNumber(scope, value);
    if (Array.isArray(value)) {
      let next: Json[] | null = null;
      for (let i = 0; i < value.length; i += 1) {
        const item = value[i]!;
        const sealed = this.walk(scope, item, paths, paths.length ? [...at, String(i)] : at, echoes, under);
        if (sealed !== item && next === null) next = value.slice(0, i);
        next?.push(sealed);
      }
      return next ?? value;
    }
    if (value !== null && typeof value === 'object') {
      // Copied only from the first change on: most results have nothing to seal and come back as they were.
      const keys = Object.keys(value);
      let next: Record<string, Json> | null = null;
      for (let i = 0; i < keys.length; i += 1) {
        const key = keys[i]!;
        const item = value[key]!;
        // A key can be the secret too ({ "4111…": 100 }): redacted like any text; paths match the key as it was.
        const plain = echoes.length === 0 && this.plainKeys.has(key);
        const sealedKey = plain ? key : this.text(scope, echoes.length ? replaceEchoes(key, echoes) : key);
        const named = under ?? (plain ? null : this.keyRedactor(key));
        if (!plain && !named && sealedKey === key && echoes.length === 0 && !key.includes('[['))
          this.rememberPlainKey(key);
        const sealed = this.walk(scope, item, paths, paths.length ? [...at, key] : at, echoes, named);
        if ((sealed !== item || sealedKey !== key) && next === null) {
          next = {};
          for (const earlier of keys.slice(0, i)) next[earlier] = value[earlier]!;
        }
        if (next) next[sealedKey] = sealed;
      }
      return next ?? value;
    }
    return value;
  }

  /** The first redactor that names `key`, if any. */
  private keyRedactor(key: string): Under | null {
    for (const { redactor } of keyRedactorsFor(this.redactors, key)) if (redactor.keys!(key)) return { redactor, key };
    return null;
  }

  /** A string or number under a key a redactor names, sealed whole (an empty string, or a token of ours, kept). */
  private sealUnder(scope: SealScope, value: string | number, { redactor, key }: Under): Json {
    if (value === '') return value;
    const text = String(value);
    if (typeof value === 'string') {
      const token = WHOLE_TOKEN.exec(value);
      if (token && this.isOwn(scope, token[2]!)) return value;
    }
    const groups = { key };
    if (redactor.accept && !redactor.accept(text, groups))
      return typeof value === 'string' ? this.text(scope, value) : this.redactNumber(scope, value);
    return this.token(scope, labelOf(redactor.label?.(text, groups) ?? redactor.name), JSON.stringify(value));
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
    if (!this.redacts || !Number.isInteger(value) || Math.abs(value) < 1e9) return value;
    const digits = String(value);
    for (const { redactor, pattern } of redactorsFor(this.redactors, digits)) {
      pattern.lastIndex = 0;
      const match = pattern.exec(digits);
      pattern.lastIndex = 0;
      if (match && match[0] === digits && (!redactor.accept || redactor.accept(digits, match.groups ?? {}))) {
        return this.token(
          scope,
          labelOf(redactor.label?.(digits, match.groups ?? {}) ?? redactor.name),
          JSON.stringify(value),
        );
      }
    }
    return value;
  }

  private redactPlain(scope: SealScope, text: string): string {
    let out = text;
    for (const compiled of redactorsFor(this.redactors, text)) out = this.redactWith(scope, out, compiled);
    return out;
  }

  /** Every match of one redactor sealed (its `value` group only, when it has one). */
  private redactWith(scope: SealScope, text: string, { redactor, pattern, valueGroup }: CompiledRedactor): string {
    let out = '';
    let last = 0;
    pattern.lastIndex = 0;
    for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
      if (match[0] === '') {
        pattern.lastIndex += 1;
        continue;
      }
      const [start, end] = (valueGroup ? match.indices?.groups?.value : undefined) ?? [
        match.index,
        match.index + match[0].length,
      ];
      const found = text.slice(start, end);
      const groups = match.groups ?? {};
      if (redactor.accept && !redactor.accept(found, groups)) continue;
      out +=
        text.slice(last, start) +
        this.token(scope, labelOf(redactor.label?.(found, groups) ?? redactor.name), JSON.stringify(found));
      last = end;
    }
    pattern.lastIndex = 0;
    return last === 0 ? text : out + text.slice(last);
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

  /** A key no redactor changes or names (`room_id`): results of one tool repeat their keys, checked once. */
  private rememberPlainKey(key: string): void {
    if (key.length > PLAIN_KEY_LENGTH) return;
    if (this.plainKeys.size >= PLAIN_KEY_CACHE) this.plainKeys.clear();
    this.plainKeys.add(key);
  }

  private remember(blob: string, owner: string): void {
    if (this.verified.size >= VERIFIED_CACHE) this.verified.clear();
    this.verified.set(blob, owner);
  }
}

interface Under {
  redactor: Redactor;
  key: string;
}

function jsonEqual(a: Json, b: Json): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** `value` with each leaf at one of `paths` replaced by `change` (structure shared where nothing changed). */
function mapAt(value: Json, paths: string[][], at: string[], change: (leaf: Json, path: string[]) => Json): Json {
  if (paths.some((path) => matches(path, at))) return change(value, at);
  if (!leadsBelow(paths, at)) return value;
  if (Array.isArray(value)) return value.map((item, index) => mapAt(item, paths, [...at, String(index)], change));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, mapAt(item, paths, [...at, key], change)]),
    );
  }
  return value;
}
