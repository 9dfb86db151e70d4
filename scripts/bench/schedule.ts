/**
 * The order in which the systems of a cell take their turns in a pass. Running one system right after another
 * puts the first one's leftovers (garbage not yet collected, a cold cache, Redis still busy with its writes) on the
 * second, so no system may follow the same one in every pass: the order turns with the pass and runs backwards every
 * other pass.
 */

/** `items` starting at position `by` (mod length). */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const at = by % items.length;
  return [...items.slice(at), ...items.slice(0, at)];
}

/**
 * The systems of the cell at `cellIndex` (its place in the plan, not in this pass's order: a turn by that would
 * cancel the pass's own) in pass `pass` (from 1).
 */
export function passOrder<T>(systems: readonly T[], pass: number, cellIndex: number): T[] {
  const turned = rotate(systems, pass + cellIndex);
  return pass % 2 === 0 ? turned.reverse() : turned;
}
