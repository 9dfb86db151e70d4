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
import { AgentError } from '../errors.js';
import type { Redactor } from './redactors.js';
import { type Sealer, memorySealer } from './sealer.js';

export interface PrivacyOptions {
  /** How sealed values are kept: `memorySealer()` (default; lost on restart) or `keyedSealer({ key })` (durable). */
  sealer?: Sealer;
  /** Patterns sealed wherever they occur in text (e.g. `cardNumbers()`, `emailAddresses()`). */
  redactors?: Redactor[];
}

/** Paths of a tool's sensitive fields: dotted, `*` for any array element or key ("card.number", "items.*.iban"). */
export type SensitivePaths = readonly string[];

const TOKEN = /\[\[sealed:([a-z0-9_-]{1,40}):([A-Za-z0-9_-]{8,4096})\]\]/g;
const WHOLE_TOKEN = /^\[\[sealed:([a-z0-9_-]{1,40}):([A-Za-z0-9_-]{8,4096})\]\]$/;

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

export class Privacy {
  readonly sealer: Sealer;
  private readonly redactors: readonly Redactor[];

  constructor(options: PrivacyOptions = {}) {
    this.sealer = options.sealer ?? memorySealer();
    this.redactors = (options.redactors ?? []).map(checkRedactor);
  }

  /** True when free text needs a pass (the host has redactors). */
  get redacts(): boolean {
    return this.redactors.length > 0;
  }

  /** `text` with every redactor match sealed; tokens already in it are kept as they are. */
  text(taskId: string, text: string): string {
    if (this.redactors.length === 0 || text === '') return text;
    let out = '';
    let last = 0;
    for (const token of text.matchAll(TOKEN)) {
      out += this.redactPlain(taskId, text.slice(last, token.index));
      out += token[0];
      last = token.index + token[0].length;
    }
    return out + this.redactPlain(taskId, text.slice(last));
  }

  /**
   * `value` with the values at `paths` sealed whole and every string redacted. Returns `value` itself when nothing
   * changed, so callers can tell (and keep the original bytes).
   */
  json<T extends Json>(taskId: string, value: T, paths: SensitivePaths = []): T {
    if (paths.length === 0 && this.redactors.length === 0) return value;
    return this.walk(taskId, value, paths.map(splitPath), []) as T;
  }

  /** A string of JSON arguments from the model, sealed: unchanged bytes when nothing in it is sensitive. */
  arguments(taskId: string, raw: string, paths: SensitivePaths): string {
    if (paths.length === 0 && this.redactors.length === 0) return raw;
    let parsed: Json;
    try {
      parsed = JSON.parse(raw) as Json;
    } catch {
      // Not JSON: the schema gate refuses it; what it says is still redacted.
      return this.text(taskId, raw);
    }
    const sealed = this.json(taskId, parsed, paths);
    return sealed === parsed ? raw : JSON.stringify(sealed);
  }

  /**
   * The values at `paths` opened (as the tool needs them), when the tokens there belong to `taskId` (null: any task,
   * for checks that only validate). A path whose value is not a token is left as it is.
   */
  open(value: Json, paths: SensitivePaths, taskId: string | null): { ok: true; value: Json; taskId: string | null; opened: OpenedToken[] } | { ok: false; failure: SealFailure } {
    if (paths.length === 0) return { ok: true, value, taskId: null, opened: [] };
    let owner: string | null = null;
    const tokens: OpenedToken[] = [];
    let failure: SealFailure | null = null;
    const opened = mapAt(value, paths.map(splitPath), [], (leaf, path) => {
      if (failure || typeof leaf !== 'string') return leaf;
      const token = WHOLE_TOKEN.exec(leaf);
      if (!token) return leaf;
      const found = this.sealer.open(token[2]!);
      if (!found) {
        failure = { path: path.join('.'), label: token[1]!, reason: 'unavailable' };
        return leaf;
      }
      if ((taskId !== null && found.taskId !== taskId) || (owner !== null && found.taskId !== owner)) {
        failure = { path: path.join('.'), label: token[1]!, reason: 'other_task' };
        return leaf;
      }
      owner = found.taskId;
      const plain = JSON.parse(found.plaintext) as Json;
      tokens.push({ token: leaf, value: plain });
      return plain;
    });
    return failure ? { ok: false, failure } : { ok: true, value: opened, taskId: owner, opened: tokens };
  }

  /**
   * `text` (a hook's or a tool's summary) with every occurrence of the values a call opened sealed again as their
   * tokens, and then redacted: a hook that quotes the value it was given does not leak it.
   */
  echoes(taskId: string, text: string, opened: readonly OpenedToken[]): string {
    let out = text;
    for (const { token, value } of opened) {
      const plain = typeof value === 'string' ? value : JSON.stringify(value);
      if (plain.length >= 4) out = out.split(plain).join(token);
    }
    return this.text(taskId, out);
  }

  private walk(taskId: string, value: Json, paths: string[][], at: string[]): Json {
    if (paths.some((path) => matches(path, at))) return this.sealWhole(taskId, value, at);
    if (typeof value === 'string') return this.text(taskId, value);
    if (Array.isArray(value)) {
      let changed = false;
      const next = value.map((item, index) => {
        const sealed = this.walk(taskId, item, paths, [...at, String(index)]);
        if (sealed !== item) changed = true;
        return sealed;
      });
      return changed ? next : value;
    }
    if (value !== null && typeof value === 'object') {
      let changed = false;
      const next: Record<string, Json> = {};
      for (const [key, item] of Object.entries(value)) {
        const sealed = this.walk(taskId, item, paths, [...at, key]);
        if (sealed !== item) changed = true;
        next[key] = sealed;
      }
      return changed ? next : value;
    }
    return value;
  }

  private sealWhole(taskId: string, value: Json, at: string[]): Json {
    if (typeof value === 'string' && WHOLE_TOKEN.test(value)) return value;
    if (value === null) return value;
    return this.token(taskId, labelOf(at[at.length - 1] ?? 'value'), JSON.stringify(value));
  }

  private redactPlain(taskId: string, text: string): string {
    let out = text;
    for (const redactor of this.redactors) {
      out = out.replace(redactor.pattern, (match) => {
        if (redactor.accept && !redactor.accept(match)) return match;
        return this.token(taskId, labelOf(redactor.label?.(match) ?? redactor.name), JSON.stringify(match));
      });
    }
    return out;
  }

  private token(taskId: string, label: string, plaintext: string): string {
    return `[[sealed:${label}:${this.sealer.seal(taskId, plaintext)}]]`;
  }
}

/** Text for people: each token shown as its label, e.g. `‹card-1111›`. */
export function displayText(text: string): string {
  return text.replace(TOKEN, (_token, label: string) => `‹${label}›`);
}

function checkRedactor(redactor: Redactor): Redactor {
  if (!redactor || typeof redactor.name !== 'string' || !(redactor.pattern instanceof RegExp)) {
    throw new AgentError('invalid_redactor', 'a redactor needs a name and a pattern (a RegExp)');
  }
  if (!redactor.pattern.global) throw new AgentError('invalid_redactor', `redactor ${redactor.name}: its pattern must be global (the g flag)`);
  return redactor;
}

function labelOf(text: string): string {
  const label = text.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40);
  return label || 'value';
}

function splitPath(path: string): string[] {
  return path.split('.');
}

function matches(path: string[], at: string[]): boolean {
  return path.length === at.length && path.every((segment, i) => segment === '*' || segment === at[i]);
}

/** `value` with each leaf at one of `paths` replaced by `change` (structure shared where nothing changed). */
function mapAt(value: Json, paths: string[][], at: string[], change: (leaf: Json, path: string[]) => Json): Json {
  if (paths.some((path) => matches(path, at))) return change(value, at);
  if (!paths.some((path) => path.length > at.length && at.every((segment, i) => path[i] === '*' || path[i] === segment))) return value;
  if (Array.isArray(value)) return value.map((item, index) => mapAt(item, paths, [...at, String(index)], change));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapAt(item, paths, [...at, key], change)]));
  }
  return value;
}
