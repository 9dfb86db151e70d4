/**
 * A task is bound to the tools it was started with: its catalog records, per tool, the effect and the version (the
 * host's `version`, or a hash of the tool's contract). A process drives the task only if every tool of that catalog
 * is installed here with the same effect and the recorded version, or a version that declares it can stand in for
 * it (`compatibleWith`). Tools installed here that the task does not name do not matter.
 */
import type { Catalog } from '../../machines/context.js';
import type { CatalogDifference } from '../errors.js';

/** What the binding needs to know of a tool installed here. */
export interface InstalledTool {
  effect: 'read' | 'write';
  /** Undefined when its version cannot be computed. */
  version: string | undefined;
  /** Earlier versions it stands in for. */
  compatibleWith: readonly string[];
}

/** How the tools installed here differ from the task's catalog, by tool name; empty when this process may drive it. */
export function catalogDifferences(
  recorded: Catalog,
  installed: (name: string) => InstalledTool | undefined,
): CatalogDifference[] {
  const differences: CatalogDifference[] = [];
  for (const name of Object.keys(recorded).sort()) {
    const facts = recorded[name]!;
    const here = installed(name);
    if (!here) {
      differences.push({ tool: name, problem: 'missing', task: facts.version ?? null, here: null });
    } else if (here.effect !== facts.effect) {
      differences.push({ tool: name, problem: 'effect', task: facts.effect, here: here.effect });
    } else if (
      facts.version !== undefined &&
      facts.version !== here.version &&
      !here.compatibleWith.includes(facts.version)
    ) {
      // A task that recorded no version (it started before tools had one) is judged by the effect alone.
      differences.push({ tool: name, problem: 'version', task: facts.version, here: here.version ?? null });
    }
  }
  return differences;
}
