/**
 * The redactors a `Privacy` runs: the defaults (credentials, `secrets.ts`) minus those the host omitted with a
 * reason, then the host's own. Each is compiled once: a pattern with a `value` group gets the match indices it
 * needs, and the defaults' cheap hints are joined into one check, so a text that none of them could match (most of
 * a tool's result: names, ids, dates) costs one scan.
 */
import { AgentError } from '../errors.js';
import type { Redactor } from './redactors.js';
import { DEFAULT_REDACTOR_NAMES, HINTS, secretRedactors } from './secrets.js';

/** Which default redactors a host turns off, and why (recorded: it is a loosening). */
export interface OmitDefaultRedactors {
  /** Names from `DEFAULT_REDACTOR_NAMES`, or `'all'`. */
  names: readonly string[] | 'all';
  /** Why these values may reach the model, the store and the streams in clear (required, not blank). */
  reason: string;
}

/** A default the host loosened: `option` names it (`privacy.omitDefaultRedactors:jwt`), `reason` is the host's. */
export interface PrivacyLoosening {
  option: string;
  reason: string;
}

export interface CompiledRedactor {
  redactor: Redactor;
  /** The pattern to run (a copy with the `d` flag when only its `value` group is sealed). */
  pattern: RegExp;
  valueGroup: boolean;
  /** A check that must match before the pattern is run; null runs it on every text. */
  hint: RegExp | null;
}

export interface RedactorSet {
  all: readonly CompiledRedactor[];
  /** Those without a hint: run on every text. */
  unhinted: readonly CompiledRedactor[];
  /** Every hint in one case-insensitive check; null when no redactor has one. */
  quick: RegExp | null;
  /** Those that name keys (`Redactor.keys`), and of them those without a hint. */
  keyed: readonly CompiledRedactor[];
  keyedUnhinted: readonly CompiledRedactor[];
  loosened: readonly PrivacyLoosening[];
  hostCount: number;
}

export function redactorSet(
  host: readonly Redactor[] | undefined,
  omit: OmitDefaultRedactors | undefined,
): RedactorSet {
  const omitted = omittedNames(omit);
  const defaults = secretRedactors().filter((redactor) => !omitted.has(redactor.name));
  const hostRedactors = (host ?? []).map(checkRedactor);
  const all = [...defaults, ...hostRedactors].map(compile);
  const hints = all.flatMap((c) => (c.hint ? [`(?:${c.hint.source})`] : []));
  return {
    all,
    unhinted: all.filter((c) => c.hint === null),
    quick: hints.length ? new RegExp(hints.join('|'), 'i') : null,
    keyed: all.filter((c) => c.redactor.keys),
    keyedUnhinted: all.filter((c) => c.redactor.keys && c.hint === null),
    loosened: [...omitted].map((name) => ({
      option: `privacy.omitDefaultRedactors:${name}`,
      reason: omit!.reason.trim(),
    })),
    hostCount: hostRedactors.length,
  };
}

/** The redactors whose hints `text` passes (and those without one). */
export function redactorsFor(set: RedactorSet, text: string): readonly CompiledRedactor[] {
  if (set.quick === null || !set.quick.test(text)) return set.unhinted;
  return set.all.filter((c) => c.hint === null || c.hint.test(text));
}

/**
 * The key-naming redactors that may name `key`: a default's hint covers the words its keys end with (`token`,
 * `secret`...), so a key that fails every hint (`room_id`, `name`) is named by none of them.
 */
export function keyRedactorsFor(set: RedactorSet, key: string): readonly CompiledRedactor[] {
  if (set.keyed.length === 0) return set.keyed;
  return set.quick === null || !set.quick.test(key) ? set.keyedUnhinted : set.keyed;
}

function omittedNames(omit: OmitDefaultRedactors | undefined): Set<string> {
  if (omit === undefined) return new Set();
  const where = 'privacy.omitDefaultRedactors';
  if (omit === null || typeof omit !== 'object') throw invalid(`${where} must be { names, reason }`);
  if (typeof omit.reason !== 'string' || omit.reason.trim() === '') {
    throw invalid(
      `${where} needs a reason (turning a default redactor off lets its values reach the model, the store and the streams in clear)`,
    );
  }
  if (omit.names === 'all') return new Set(DEFAULT_REDACTOR_NAMES);
  if (!Array.isArray(omit.names)) throw invalid(`${where}.names must be a list of default redactor names or 'all'`);
  const known = new Set<string>(DEFAULT_REDACTOR_NAMES);
  const unknown = omit.names.filter((name) => typeof name !== 'string' || !known.has(name));
  if (unknown.length) {
    throw invalid(
      `${where}: no default redactor is named ${unknown.map((n) => JSON.stringify(n)).join(', ')}; the defaults are ${DEFAULT_REDACTOR_NAMES.join(', ')}`,
    );
  }
  return new Set(omit.names);
}

function compile(redactor: Redactor): CompiledRedactor {
  const valueGroup = /\(\?<value>/.test(redactor.pattern.source);
  return {
    redactor,
    pattern:
      valueGroup && !redactor.pattern.hasIndices
        ? new RegExp(redactor.pattern.source, `${redactor.pattern.flags}d`)
        : redactor.pattern,
    valueGroup,
    hint: HINTS.get(redactor) ?? null,
  };
}

function checkRedactor(redactor: Redactor): Redactor {
  if (!redactor || typeof redactor.name !== 'string' || !(redactor.pattern instanceof RegExp)) {
    throw new AgentError('invalid_redactor', 'a redactor needs a name and a pattern (a RegExp)');
  }
  if (!redactor.pattern.global)
    throw new AgentError('invalid_redactor', `redactor ${redactor.name}: its pattern must be global (the g flag)`);
  if (redactor.keys !== undefined && typeof redactor.keys !== 'function')
    throw new AgentError('invalid_redactor', `redactor ${redactor.name}: keys must be a function of a key`);
  return redactor;
}

function invalid(message: string): AgentError {
  return new AgentError('invalid_privacy_options', message);
}
