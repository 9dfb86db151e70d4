/**
 * Generates `visualizations/agentMachine.mmd` (Mermaid stateDiagram-v2) and `visualizations/agentMachine.html` (a
 * self-contained page with an SVG drawn here, no network) from the agent machine's definition: states, transitions
 * with their guards (composed `and`/`not` spelled out), actions, invokes and final states.
 *
 * The output is a pure function of the machine, so `test/visualizations.test.ts` can regenerate it in memory and
 * fail when the committed files are stale. Run with `npm run visualize`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { agentMachine } from '../machines/agentMachine.js';

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

function actionName(action: unknown): string {
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

// --- Mermaid ----------------------------------------------------------------------------------------------

const mermaidId = (path: string) => (path === '*' ? 'any_state' : path.replace(/\./g, '_'));
const mermaidText = (text: string) => text.replace(/[;#"]/g, ' ');

export function toMermaid(chart: Chart): string {
  const lines = [
    'stateDiagram-v2',
    '  %% Generated by scripts/visualize.ts from machines/agentMachine.ts; do not edit. Run `npm run visualize`.',
    '  classDef anyState stroke-dasharray: 4 4',
  ];
  const containerOf = (edge: ChartEdge): string | null => {
    const parentOf = (p: string) => chart.states.find((s) => s.path === p)?.parent ?? null;
    const from = edge.source === '*' ? null : parentOf(edge.source);
    const to = edge.target === null ? from : parentOf(edge.target);
    return from === to ? from : null;
  };
  const emit = (parent: string | null, indent: string) => {
    const initial = parent === null ? chart.initial : chart.states.find((s) => s.path === parent)!.initial;
    const start = parent === null && chart.entry.length > 0 ? `: start / ${chart.entry.join(', ')}` : '';
    if (initial) lines.push(`${indent}[*] --> ${mermaidId(initial)}${start}`);
    for (const state of chart.states.filter((s) => s.parent === parent)) {
      const id = mermaidId(state.path);
      if (state.type === 'compound' || state.type === 'parallel') {
        lines.push(`${indent}state ${id} {`);
        emit(state.path, `${indent}  `);
        lines.push(`${indent}}`);
      } else {
        lines.push(`${indent}state "${state.key}" as ${id}`);
      }
      for (const invoke of state.invokes) lines.push(`${indent}${id} : invokes ${invoke.src} as ${invoke.id}`);
      for (const action of state.entry) lines.push(`${indent}${id} : entry / ${action}`);
      if (state.type === 'final') lines.push(`${indent}${id} --> [*]`);
    }
    for (const edge of chart.edges.filter((e) => e.source !== '*' && containerOf(e) === parent)) {
      const target = mermaidId(edge.target ?? edge.source);
      lines.push(`${indent}${mermaidId(edge.source)} --> ${target}: ${mermaidText(edgeLabel(edge))}`);
    }
  };
  emit(null, '  ');
  const fromAny = chart.edges.filter((e) => e.source === '*');
  if (fromAny.length > 0) {
    lines.push('  state "any state (root handler)" as any_state', '  class any_state anyState');
    for (const edge of fromAny) {
      lines.push(`  any_state --> ${mermaidId(edge.target ?? '*')}: ${mermaidText(edgeLabel(edge))}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

// --- SVG layout -------------------------------------------------------------------------------------------

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

const NAME_CHAR = 8;
const NOTE_CHAR = 6.6;
const GAP_X = 48;
const GAP_Y = 96;
const PAD = 20;
const HEADER = 28;

const fmt = (n: number) => (Math.round(n * 10) / 10).toString();
const esc = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function leafSize(state: ChartState | null, label: string, note: string): { w: number; h: number } {
  const w = Math.max(120, label.length * NAME_CHAR + 28, note.length * NOTE_CHAR + 24);
  return { w: Math.ceil(w), h: note || state?.type === 'final' ? 48 : 34 };
}

function noteOf(state: ChartState): string {
  if (state.invokes.length > 0) return `invokes ${state.invokes.map((i) => i.src).join(', ')}`;
  return state.type === 'final' ? 'final' : '';
}

/** Rows of siblings: BFS rank from the initial child over edges between siblings; final states last. */
function rowsOf(chart: Chart, parent: string | null): ChartState[][] {
  const siblings = chart.states.filter((s) => s.parent === parent);
  const toSibling = (path: string | null) =>
    siblings.find((s) => path !== null && (path === s.path || path.startsWith(`${s.path}.`)));
  const initial = parent === null ? chart.initial : chart.states.find((s) => s.path === parent)!.initial;
  const rank = new Map<string, number>();
  const start = toSibling(initial);
  const queue = start ? [start] : [];
  if (start) rank.set(start.path, 0);
  while (queue.length > 0) {
    const current = queue.shift()!;
    for (const edge of chart.edges) {
      if (toSibling(edge.source) !== current) continue;
      const next = toSibling(edge.target);
      if (next && !rank.has(next.path) && next.type !== 'final') {
        rank.set(next.path, rank.get(current.path)! + 1);
        queue.push(next);
      }
    }
  }
  const last = Math.max(-1, ...rank.values()) + 1;
  const rows: ChartState[][] = [];
  for (const state of siblings) {
    const r = state.type === 'final' ? last + 1 : rank.get(state.path) ?? last;
    (rows[r] ??= []).push(state);
  }
  return rows.filter((row) => row.length > 0);
}

interface Item {
  path: string;
  w: number;
  h: number;
  /** Boxes of the children of a compound state, relative to its content area. */
  inner: Map<string, Box> | null;
  innerW: number;
}

/** Lays out the siblings under `parent` at (x, y); returns their extent and fills `boxes`. */
function layout(chart: Chart, parent: string | null, x: number, y: number, boxes: Map<string, Box>) {
  const sized: Item[][] = rowsOf(chart, parent).map((row) =>
    row.map((state): Item => {
      if (state.type === 'compound' || state.type === 'parallel') {
        const inner = new Map<string, Box>();
        const extent = layout(chart, state.path, 0, 0, inner);
        const w = Math.max(extent.w + 2 * PAD, state.key.length * NAME_CHAR + 2 * PAD);
        return { path: state.path, w, h: extent.h + HEADER + PAD, inner, innerW: extent.w };
      }
      return { path: state.path, ...leafSize(state, state.key, noteOf(state)), inner: null, innerW: 0 };
    }),
  );
  // Root handlers ("any state") sit next to the state they lead to.
  const anyTarget = parent === null ? chart.edges.find((e) => e.source === '*')?.target : undefined;
  if (anyTarget !== undefined) {
    const top = anyTarget?.split('.')[0];
    const row = sized.find((r) => r.some((item) => item.path === top)) ?? sized[0]!;
    const at = row.findIndex((item) => item.path === top) + 1;
    row.splice(at, 0, { path: '*', ...leafSize(null, 'any state', 'root handlers'), inner: null, innerW: 0 });
  }
  const rowWidth = (row: Item[]) => row.reduce((sum, item) => sum + item.w, 0) + GAP_X * (row.length - 1);
  const width = Math.max(...sized.map(rowWidth));
  let top = y;
  for (const row of sized) {
    let left = x + (width - rowWidth(row)) / 2;
    const height = Math.max(...row.map((item) => item.h));
    for (const item of row) {
      const box = { x: left, y: top + (height - item.h) / 2, w: item.w, h: item.h };
      boxes.set(item.path, box);
      if (item.inner) {
        const dx = box.x + (item.w - item.innerW) / 2;
        for (const [innerPath, b] of item.inner) boxes.set(innerPath, { ...b, x: b.x + dx, y: b.y + box.y + HEADER });
      }
      left += item.w + GAP_X;
    }
    top += height + GAP_Y;
  }
  return { w: width, h: top - y - GAP_Y };
}

function border(box: Box, toward: { x: number; y: number }): { x: number; y: number } {
  const cx = box.x + box.w / 2;
  const cy = box.y + box.h / 2;
  const dx = toward.x - cx;
  const dy = toward.y - cy;
  if (dx === 0 && dy === 0) return { x: cx, y: cy };
  const scale = Math.min(dx === 0 ? Infinity : box.w / 2 / Math.abs(dx), dy === 0 ? Infinity : box.h / 2 / Math.abs(dy));
  return { x: cx + dx * scale, y: cy + dy * scale };
}

const center = (b: Box) => ({ x: b.x + b.w / 2, y: b.y + b.h / 2 });
const overlaps = (p: Box, q: Box) => p.x < q.x + q.w && q.x < p.x + p.w && p.y < q.y + q.h && q.y < p.y + p.h;
const BADGE_SPOTS = [0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82];

export function toSvg(chart: Chart): string {
  const boxes = new Map<string, Box>();
  const margin = 40;
  const extent = layout(chart, null, margin, margin + 30, boxes);
  const loopRoom = 90;
  const width = Math.ceil(extent.w + 2 * margin + loopRoom);
  const height = Math.ceil(extent.h + 2 * margin + 30);
  const parts: string[] = [];
  for (const state of chart.states) {
    const b = boxes.get(state.path)!;
    const compound = state.type === 'compound' || state.type === 'parallel';
    const cls = compound ? 'compound' : state.type === 'final' ? 'final' : 'state';
    parts.push(`<g class="${cls}" id="state-${esc(mermaidId(state.path))}">`);
    parts.push(`<rect x="${fmt(b.x)}" y="${fmt(b.y)}" width="${fmt(b.w)}" height="${fmt(b.h)}" rx="8"/>`);
    if (state.type === 'final') {
      parts.push(`<rect class="inner" x="${fmt(b.x + 4)}" y="${fmt(b.y + 4)}" width="${fmt(b.w - 8)}" height="${fmt(b.h - 8)}" rx="5"/>`);
    }
    const note = compound ? '' : noteOf(state);
    const nameY = compound ? b.y + 19 : note ? b.y + 21 : b.y + b.h / 2 + 5;
    const nameX = compound ? b.x + 12 + (state.key.length * NAME_CHAR) / 2 : b.x + b.w / 2;
    parts.push(`<text class="name" x="${fmt(nameX)}" y="${fmt(nameY)}">${esc(state.key)}</text>`);
    if (note && state.type !== 'final') parts.push(`<text class="note" x="${fmt(b.x + b.w / 2)}" y="${fmt(b.y + 38)}">${esc(note)}</text>`);
    parts.push('</g>');
  }
  const any = boxes.get('*');
  if (any) {
    parts.push(`<g class="any"><rect x="${fmt(any.x)}" y="${fmt(any.y)}" width="${fmt(any.w)}" height="${fmt(any.h)}" rx="8"/>`);
    parts.push(`<text class="name" x="${fmt(any.x + any.w / 2)}" y="${fmt(any.y + 21)}">any state</text>`);
    parts.push(`<text class="note" x="${fmt(any.x + any.w / 2)}" y="${fmt(any.y + 38)}">root handlers</text></g>`);
  }
  // Initial markers: a dot above each initial state.
  const initials = [chart.initial, ...chart.states.map((s) => s.initial)].filter((p): p is string => p !== null);
  for (const path of initials) {
    const b = boxes.get(path)!;
    const cx = b.x + b.w / 2;
    parts.push(`<circle class="initial" cx="${fmt(cx)}" cy="${fmt(b.y - 20)}" r="5"/>`);
    parts.push(`<path class="edge" d="M${fmt(cx)} ${fmt(b.y - 15)} L${fmt(cx)} ${fmt(b.y - 1)}" marker-end="url(#arrow)"/>`);
  }
  // One arrow per (source, target), labelled with the numbers of the transitions it stands for.
  const groups = new Map<string, ChartEdge[]>();
  for (const edge of chart.edges) {
    const key = `${edge.source}>${edge.target ?? edge.source}`;
    groups.set(key, [...(groups.get(key) ?? []), edge]);
  }
  const occupied = chart.states.filter((st) => st.type !== 'compound' && st.type !== 'parallel').map((st) => boxes.get(st.path)!);
  for (const [key, edges] of groups) {
    const [source, target] = key.split('>') as [string, string];
    const label = edges.map((e) => e.index).join(',');
    const w = label.length * 6.2 + 10;
    const from = boxes.get(source)!;
    const to = boxes.get(target)!;
    let d: string;
    let badge: { x: number; y: number };
    if (from === to) {
      // A loop over the top right corner, its badge above it.
      const x = from.x + from.w - 34;
      const y = from.y;
      d = `M${fmt(x)} ${fmt(y)} C${fmt(x - 6)} ${fmt(y - 34)} ${fmt(x + 30)} ${fmt(y - 34)} ${fmt(x + 24)} ${fmt(y)}`;
      badge = { x: x + 12, y: y - 36 };
    } else {
      const a = border(from, center(to));
      const b = border(to, center(from));
      // A pair with arrows both ways bends each to its own side.
      const offset = groups.has(`${target}>${source}`) ? 18 : 0;
      const len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      const c = { x: (a.x + b.x) / 2 - ((b.y - a.y) / len) * offset, y: (a.y + b.y) / 2 + ((b.x - a.x) / len) * offset };
      d = `M${fmt(a.x)} ${fmt(a.y)} Q${fmt(c.x)} ${fmt(c.y)} ${fmt(b.x)} ${fmt(b.y)}`;
      const at = (t: number) => ({
        x: (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c.x + t ** 2 * b.x,
        y: (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c.y + t ** 2 * b.y,
      });
      // The first point along the curve, from its middle outwards, where the badge covers no state or badge.
      const free = BADGE_SPOTS.map(at).find((p) => !occupied.some((o) => overlaps(o, { x: p.x - w / 2, y: p.y - 8, w, h: 16 })));
      badge = free ?? at(0.5);
    }
    occupied.push({ x: badge.x - w / 2, y: badge.y - 8, w, h: 16 });
    const title = edges.map((e) => `${e.index}. ${e.source} → ${e.target ?? e.source}: ${edgeLabel(e)}`).join('\n');
    const stays = edges.every((e) => e.target === null);
    parts.push(`<g class="transition"><title>${esc(title)}</title>`);
    parts.push(`<path class="edge${stays ? ' stays' : ''}" d="${d}" marker-end="url(#arrow)"/>`);
    parts.push(`<rect class="badge" x="${fmt(badge.x - w / 2)}" y="${fmt(badge.y - 8)}" width="${fmt(w)}" height="16" rx="8"/>`);
    parts.push(`<text class="badge" x="${fmt(badge.x)}" y="${fmt(badge.y + 3.5)}">${label}</text></g>`);
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${esc(chart.id)} statechart">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker></defs>',
    ...parts,
    '</svg>',
  ].join('\n');
}

// --- HTML -------------------------------------------------------------------------------------------------

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}.wrap{overflow:auto;border:1px solid #d5dae3;border-radius:8px}
svg text{font-family:ui-monospace,Menlo,Consolas,monospace;text-anchor:middle}
.state rect,.final rect{fill:#f4f7fc;stroke:#41597a;stroke-width:1.4}.final rect{fill:#eceef1}.final rect.inner{fill:none}
.compound>rect{fill:#fbfcfe;stroke:#7c8ea8;stroke-width:1.2;stroke-dasharray:6 3}.any rect{fill:#fff;stroke:#9aa5b5;stroke-dasharray:4 4}
text.name{font-size:13px;font-weight:600;fill:#1d2330}text.note{font-size:11px;fill:#5b6678}
.edge{fill:none;stroke:#6d7b91;stroke-width:1.2}.edge.stays{stroke-dasharray:3 3}marker path{fill:#6d7b91}
circle.initial{fill:#1d2330}rect.badge{fill:#fff;stroke:#6d7b91}text.badge{font-size:10px;fill:#1d2330}
.transition:hover .edge{stroke:#c2410c;stroke-width:2}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #d5dae3;padding:3px 8px;text-align:left;vertical-align:top}
code{font-family:ui-monospace,Menlo,Consolas,monospace}pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:12px}`;

export function toHtml(chart: Chart, mermaid: string): string {
  const rows = chart.edges.map((e) => {
    const guard = e.guard ?? (e.fallback ? 'else' : '');
    const target = e.target === null ? `${e.source === '*' ? '(any)' : e.source} (stays)` : e.target;
    const note = e.reenter ? ' (re-enters)' : '';
    return `<tr id="t${e.index}"><td>${e.index}</td><td><code>${esc(e.source === '*' ? 'any state' : e.source)}</code></td><td><code>${esc(e.event)}</code></td><td><code>${esc(guard)}</code></td><td><code>${esc(target)}</code>${note}</td><td><code>${esc(e.actions.join(', '))}</code></td></tr>`;
  });
  const states = chart.states.map((s) => {
    const invokes = s.invokes.map((i) => `${i.src} (id ${i.id})`).join(', ');
    return `<tr><td><code>${esc(s.path)}</code></td><td>${s.type}</td><td>${esc(invokes)}</td><td>${s.initial ? `<code>${esc(s.initial)}</code>` : ''}</td></tr>`;
  });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${esc(chart.id)} statechart</title>
<style>
${STYLE}
</style>
</head>
<body>
<h1>The <code>${esc(chart.id)}</code> statechart</h1>
<p>Generated by <code>scripts/visualize.ts</code> from <code>machines/agentMachine.ts</code>; do not edit, run <code>npm run visualize</code>. Numbered badges refer to the transition table; dashed arrows are transitions that keep the state. Initial state: <code>${esc(chart.initial ?? '')}</code>, entered with <code>${esc(chart.entry.join(', '))}</code>.</p>
<div class="wrap">
${toSvg(chart)}
</div>
<h2>Transitions (in definition order; for one event the first candidate whose guard holds is taken)</h2>
<table>
<thead><tr><th>#</th><th>from</th><th>event</th><th>guard</th><th>to</th><th>actions</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
<h2>States</h2>
<table>
<thead><tr><th>state</th><th>type</th><th>invokes</th><th>initial child</th></tr></thead>
<tbody>
${states.join('\n')}
</tbody>
</table>
<h2>Mermaid source</h2>
<details><summary><code>agentMachine.mmd</code></summary>
<pre>${esc(mermaid)}</pre>
</details>
</body>
</html>
`;
}

// --- entry point ------------------------------------------------------------------------------------------

export const VISUALIZATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'visualizations');

/** File name → content of every generated visualization. Pure. */
export function renderVisualizations(machine: AnyStateMachine = agentMachine): Record<string, string> {
  const chart = describeChart(machine);
  const mermaid = toMermaid(chart);
  return { 'agentMachine.mmd': mermaid, 'agentMachine.html': toHtml(chart, mermaid) };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  mkdirSync(VISUALIZATIONS_DIR, { recursive: true });
  for (const [name, content] of Object.entries(renderVisualizations())) {
    writeFileSync(join(VISUALIZATIONS_DIR, name), content);
    console.log(`wrote visualizations/${name} (${content.length} bytes)`);
  }
}
