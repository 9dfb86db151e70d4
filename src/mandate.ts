/**
 * Mandates: what the user actually asked for, as structured terms the host derives from the request before the task
 * starts (a slot and a head count, an order and a maximum amount). The host defines each kind with its own zod
 * schema; a task is started with one mandate, persisted with it and never changed; each tool says, with a pure rule,
 * how its arguments must relate to the terms. A write outside them is refused before anything runs.
 *
 * @example
 * const refundMandate = defineMandate('refund', z.strictObject({ order_id: z.string(), max_cents: z.number().int() }));
 * const refundOrder = defineTool({ ..., mandate: refundMandate.rule((args, terms) =>
 *   args.order_id !== terms.order_id ? { ok: false, code: 'other_order', summary: `the user asked about ${terms.order_id}` }
 *   : args.amount_cents > terms.max_cents ? { ok: false, code: 'amount_above_request', summary: 'more than the user asked for' }
 *   : { ok: true }) });
 * createOrchestrator({ tools: [refundOrder], mandates: [refundMandate], ... });
 * orchestrator.start({ principal, goal, mandate: refundMandate.of({ order_id: 'O-1001', max_cents: 19_900 }) });
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Json, Mandate } from '../machines/context.js';
import { toJson } from '../machines/lib/arguments.js';
import { zodSummary } from '../machines/lib/text.js';
import type { MandateRule, MandateVerdict, TaskFacts } from '../machines/toolkit.js';
import { AgentError, HostRequestError } from './errors.js';

export interface MandateKind<T> {
  readonly kind: string;
  readonly schema: z.ZodType<T>;
  /** The most money a task under these terms may move (minor units): its money budget, at most. */
  readonly money?: (terms: T) => number;
  /**
   * Whether `child`'s terms ask for no more than `parent`'s (the same order, a smaller amount...): what a sub-task's
   * mandate must satisfy. Without it, no sub-task can carry a mandate of this kind.
   */
  readonly within?: (child: T, parent: T) => boolean;
  /**
   * The mandate a task starts with: the terms are checked against the schema now, and a unique id is minted. A
   * mandate authorises one task: make one per request (a second start with it is refused, `mandate_used`).
   */
  of(terms: T): Mandate;
  /**
   * A tool's rule over the terms of this kind, given what the task did so far (the money its writes moved); a mandate
   * of another kind, or terms that no longer parse, refuse.
   */
  rule<I>(check: (args: I, terms: T, task: Readonly<TaskFacts>) => MandateVerdict): MandateRule<I>;
  /**
   * The terms of `mandate` when it is of this kind and they parse, else null: for a tool's `validate` or `authorize`,
   * which check facts the arguments do not carry against what the user asked for (`ctx.mandate`).
   */
  termsOf(mandate: Readonly<Mandate> | null | undefined): T | null;
}

export interface MandateOptions<T> {
  /** The most money the user asked to move under these terms: the task's money budget is capped by it. */
  money?: (terms: T) => number;
  /** Whether `child`'s terms ask for no more than `parent`'s: needed for a sub-task's mandate of this kind. */
  within?: (child: T, parent: T) => boolean;
}

const KIND = /^[a-z][a-z0-9_.-]{0,63}$/;

export function defineMandate<T>(kind: string, schema: z.ZodType<T>, options: MandateOptions<T> = {}): MandateKind<T> {
  if (!KIND.test(kind))
    throw new AgentError(
      'invalid_mandate_kind',
      `mandate kind ${JSON.stringify(kind)}: lower case (a-z, 0-9, _ . -), starting with a letter`,
    );
  const parse = (terms: unknown): { ok: true; terms: T } | { ok: false; summary: string } => {
    const parsed = schema.safeParse(terms);
    return parsed.success ? { ok: true, terms: parsed.data } : { ok: false, summary: zodSummary(parsed.error) };
  };
  return {
    kind,
    schema,
    ...(options.money ? { money: options.money } : {}),
    ...(options.within ? { within: options.within } : {}),
    of(terms) {
      return checkMandate(new Map([[kind, this as MandateKind<unknown>]]), {
        kind,
        terms: terms as Json,
        id: randomUUID(),
      });
    },
    termsOf(mandate) {
      if (!mandate || mandate.kind !== kind) return null;
      const parsed = parse(mandate.terms);
      return parsed.ok ? parsed.terms : null;
    },
    rule(check) {
      return (args, mandate, task) => {
        if (mandate.kind !== kind)
          return {
            ok: false,
            code: 'other_mandate_kind',
            summary: `this tool's rule covers ${kind} mandates, not ${mandate.kind}`,
          };
        const parsed = parse(mandate.terms);
        if (!parsed.ok)
          return {
            ok: false,
            code: 'invalid_mandate',
            summary: `the stored mandate does not match its schema: ${parsed.summary}`,
          };
        return check(args, parsed.terms, task);
      };
    },
  };
}

/**
 * The money budget of a task under `mandate`: the kind's cap (what the user asked to move), lowered by the start
 * request's own limit when it gives one. Without a cap, the request's limit, or the host's default.
 */
export function moneyUnder(
  kinds: ReadonlyMap<string, MandateKind<unknown>>,
  mandate: Mandate | null,
  requested: number | undefined,
  fallback: number,
): number {
  const kind = mandate ? kinds.get(mandate.kind) : undefined;
  if (!kind?.money || !mandate) return requested ?? fallback;
  const parsed = kind.schema.safeParse(mandate.terms);
  const cap = parsed.success ? kind.money(parsed.data) : 0;
  if (!(Number.isSafeInteger(cap) && cap >= 0))
    throw new HostRequestError(
      'invalid_request',
      `start: mandate ${mandate.kind}: its money cap is not a whole amount (${String(cap)})`,
    );
  return requested === undefined ? cap : Math.min(cap, requested);
}

/**
 * The mandate a start request carries, checked against the schema of its kind and stored as plain JSON. It must
 * carry the id `MandateKind.of` mints: the id is what makes it single-use.
 */
export function checkMandate(
  kinds: ReadonlyMap<string, MandateKind<unknown>>,
  mandate: { kind: string; terms: unknown; id?: string | undefined },
): Mandate {
  if (mandate.id === undefined) {
    throw new HostRequestError(
      'invalid_request',
      `start: mandate ${JSON.stringify(mandate.kind)} has no id: make it with defineMandate(...).of(terms), once per request (a mandate authorises one task)`,
    );
  }
  const known = kinds.get(mandate.kind);
  if (!known) {
    throw new HostRequestError(
      'invalid_request',
      `start: mandate: no mandate kind ${JSON.stringify(mandate.kind)} is installed (known: ${[...kinds.keys()].join(', ') || 'none'})`,
    );
  }
  const parsed = known.schema.safeParse(mandate.terms);
  if (!parsed.success)
    throw new HostRequestError('invalid_request', `start: mandate.terms: ${zodSummary(parsed.error)}`);
  try {
    return { kind: mandate.kind, terms: toJson(parsed.data), id: mandate.id };
  } catch (error) {
    throw new HostRequestError(
      'invalid_request',
      `start: mandate.terms must be plain JSON (${(error as Error).message})`,
    );
  }
}
