/**
 * What the chart knows about tools beyond the facts persisted in a task's catalog: the host's current definitions,
 * read synchronously by the schema and permission guards and by the step that admits a call. The runtime builds
 * it from the installed tools (`src/runtime/toolRegistry.ts`) and passes it to `createAgentMachine`.
 *
 * Kept to pure pieces: a zod schema, scopes, flags, and the tool's own synchronous rules (confirmation, redaction,
 * the approver's summary). A rule that throws or returns something odd fails closed where it is called.
 */
import type { z } from 'zod';
import type { Effect, Json, Principal } from './context.js';

/** Never, always, or a predicate over the validated arguments and the principal (e.g. refunds above an amount). */
export type ConfirmationRule<I = any> = 'never' | 'always' | ((args: I, principal: Readonly<Principal>) => boolean);

export interface ToolRules<I = any> {
  name: string;
  effect: Effect;
  /** The schema gate: the arguments must parse, and parse to themselves (no transforms). */
  input: z.ZodType<I>;
  /** The permission gate: the task's principal must hold every one. */
  scopes: readonly string[];
  /** The tool has business validation: its calls go through `vetting.validating`. */
  validates: boolean;
  /** The tool has a resource-level permission check: its calls go through `vetting.authorizing`. */
  authorizes: boolean;
  confirm?: ConfirmationRule<I>;
  /** One line shown to the approver, e.g. "Refund 999.00 on order O-1001". */
  describeConfirmation?: (args: I) => string;
  /** Arguments as the audit and the approver see them. */
  redact?: (args: I) => Json;
}

export interface Toolkit {
  /** The installed tool of that name, or undefined. */
  rules(name: string): ToolRules | undefined;
  /** Hex SHA-256 of a UTF-8 string. Injected so that machines/ stays free of runtime imports. */
  sha256(text: string): string;
}

/** A toolkit with no tools: every call fails the schema gate. For diagrams and for charts under test. */
export function emptyToolkit(sha256: (text: string) => string = () => '0'.repeat(64)): Toolkit {
  return { rules: () => undefined, sha256 };
}
