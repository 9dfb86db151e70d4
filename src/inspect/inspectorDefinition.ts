/**
 * The chart's definition as the Stately inspector receives it: the machine's config as JSON, with every guard kept
 * by name. A plain `JSON.stringify` drops functions, and every composed guard (`not(...)`, `and([...])`,
 * `or([...])`) is one: the inspector would then draw a refusal such as `vetting.judging`'s
 * `not('hasScopesForTool')` branch as unconditional. Here a composed guard is written as the chart spells it
 * (`not(hasScopesForTool)`, `and(isNextStepWrite, isUserAway, not(isUnwinding))`); other functions (inline actions,
 * the context factory) are still dropped, as the inspector cannot use them.
 */

/** What a guard can be in a machine config: a name, `{ type, params }`, or a function built by `not`/`and`/`or`. */
type GuardLike = string | { type?: unknown; params?: unknown } | GuardFunction | undefined;
interface GuardFunction {
  (...args: never[]): unknown;
  guards?: unknown[];
  check?: { name?: string };
}

const COMBINATORS: Record<string, string> = { checkNot: 'not', checkAnd: 'and', checkOr: 'or' };

/**
 * A guard as one readable expression, as the chart's source spells it.
 *
 * @example
 * guardExpression(not('hasScopesForTool')); // 'not(hasScopesForTool)'
 * guardExpression(and(['a', not('b')])); // 'and(a, not(b))'
 */
export function guardExpression(guard: GuardLike): string {
  if (guard === undefined) return '';
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    const combinator = COMBINATORS[guard.check?.name ?? ''] ?? (guard.name || 'inline');
    const parts = Array.isArray(guard.guards) ? guard.guards.map((inner) => guardExpression(inner as GuardLike)) : [];
    return parts.length > 0 ? `${combinator}(${parts.join(', ')})` : combinator;
  }
  return typeof guard.type === 'string' ? guard.type : 'inline';
}

/** The config as JSON for the inspector's `@xstate.actor` frame: guards kept by name, other functions dropped. */
export function inspectorDefinition(config: unknown): string {
  return JSON.stringify(config, (key, value: unknown) => {
    if (key === 'guard' && typeof value === 'function') return guardExpression(value as GuardFunction);
    return typeof value === 'function' ? undefined : value;
  });
}
