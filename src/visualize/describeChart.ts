/**
 * Reads a statechart's definition into plain data: states (with parents, initial children, invokes, entry
 * actions) and transitions in definition order (with their guards spelled out, composed `and`/`not` included,
 * and their actions). The diagrams (`mermaid.ts`, `chartSvg.ts`, `chartHtml.ts`) and the task trace page
 * (`traceHtml.ts`) are drawn from it.
 */
import type { AnyStateMachine, AnyStateNode } from 'xstate';

export interface ChartState {
  /** Path below the root, dotted: `executing.selecting`. */
  path: string;
  key: string;
  parent: string | null;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  /** Path of the initial child, for compound states. */
  initial: string | null;
  invokes: { id: string; src: string }[];
  entry: string[];
  /** What the state means to the outside (`waiting`, `terminal`, `effect`...). */
  tags: string[];
  description: string | null;
}

export interface ChartEdge {
  /** Numbered in definition order; the HTML table and the SVG badges use it. */
  index: number;
  /** State path, or `*` for a handler on the root (taken from any state). */
  source: string;
  /** State path; null for a targetless transition (actions only, the state does not change). */
  target: string | null;
  event: string;
  guard: string | null;
  guardNames: string[];
  /** Unguarded candidate after guarded ones for the same event: taken when none of them holds. */
  fallback: boolean;
  actions: string[];
  reenter: boolean;
}

export interface Chart {
  id: string;
  entry: string[];
  initial: string | null;
  states: ChartState[];
  edges: ChartEdge[];
}

// --- reading the definition -------------------------------------------------------------------------------

type GuardLike = string | { type?: string; name?: string; guards?: unknown[]; check?: { name?: string } } | undefined;

function pathOf(node: AnyStateNode): string {
  return node.path.join('.');
}

/** An action as the chart names it. */
export function actionName(action: unknown): string {
  if (typeof action === 'string') return action;
  if (typeof action === 'function') return action.name || 'inline';
  if (action && typeof action === 'object' && 'type' in action) return String(action.type);
  return 'inline';
}

/** A guard as text (`not hasBudgetForModelTurn`, `a and not b`) plus the named guards it uses. */
export function describeGuard(guard: GuardLike, names: string[] = []): { text: string; names: string[] } {
  if (guard === undefined) return { text: '', names };
  if (typeof guard === 'string') return { text: guard, names: [...names, guard] };
  if (typeof guard === 'function' || Array.isArray(guard.guards)) {
    const kind = guard.check?.name ?? guard.name ?? '';
    const parts = (guard.guards ?? []).map((inner) => describeGuard(inner as GuardLike));
    const all = [...names, ...parts.flatMap((p) => p.names)];
    const wrap = (p: { text: string }) => (/ (and|or) /.test(p.text) ? `(${p.text})` : p.text);
    if (/not/i.test(kind)) return { text: `not ${wrap(parts[0]!)}`, names: all };
    if (/or/i.test(kind)) return { text: parts.map(wrap).join(' or '), names: all };
    if (/and/i.test(kind)) return { text: parts.map(wrap).join(' and '), names: all };
    return { text: guard.name || 'inline', names: all };
  }
  const name = guard.type ?? 'inline';
  return { text: name, names: [...names, name] };
}

/** Walks the machine's state nodes and transitions into plain data, in definition order. */
export function describeChart(machine: AnyStateMachine): Chart {
  const states: ChartState[] = [];
  const edges: ChartEdge[] = [];
  const addEdges = (source: string, event: string, transitions: readonly unknown[]) => {
    let guardedBefore = false;
    for (const raw of transitions) {
      const t = raw as { target?: AnyStateNode[]; guard?: GuardLike; actions: unknown[]; reenter?: boolean };
      const guard = describeGuard(t.guard);
      edges.push({
        index: edges.length + 1,
        source,
        target: t.target && t.target.length > 0 ? pathOf(t.target[0]!) : null,
        event,
        guard: guard.text || null,
        guardNames: guard.names,
        fallback: !guard.text && guardedBefore,
        actions: t.actions.map(actionName),
        reenter: t.reenter === true,
      });
      guardedBefore ||= Boolean(guard.text);
    }
  };
  const visit = (node: AnyStateNode) => {
    const path = pathOf(node);
    if (node !== machine.root) {
      states.push({
        path,
        key: node.key,
        parent: node.parent && node.parent !== machine.root ? pathOf(node.parent) : null,
        type: node.type,
        initial: node.initial?.target?.[0] ? pathOf(node.initial.target[0]) : null,
        invokes: node.invoke.map((i) => ({ id: i.id, src: typeof i.src === 'string' ? i.src : 'inline' })),
        entry: node.entry.map(actionName),
        tags: [...node.tags],
        description: node.description ?? null,
      });
    }
    const source = node === machine.root ? '*' : path;
    if (node.always) addEdges(source, 'always', node.always);
    for (const [event, transitions] of node.transitions) addEdges(source, event, transitions);
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(machine.root);
  const root = machine.root;
  return {
    id: root.id,
    entry: root.entry.map(actionName),
    initial: root.initial?.target?.[0] ? pathOf(root.initial.target[0]) : null,
    states,
    edges,
  };
}

export function edgeLabel(edge: ChartEdge): string {
  const guard = edge.guard ? ` [${edge.guard}]` : edge.fallback ? ' [else]' : '';
  const actions = edge.actions.length > 0 ? ` / ${edge.actions.join(', ')}` : '';
  const note = edge.target === null ? ' (stays)' : edge.reenter ? ' (re-enters)' : '';
  return `${edge.event}${guard}${actions}${note}`;
}
