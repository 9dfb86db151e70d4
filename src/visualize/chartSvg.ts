/**
 * The chart as a self-contained SVG, laid out here (no layout engine, no network): compound states as dashed
 * containers, siblings in rows by distance from the initial state, final states last, one numbered arrow per
 * (source, target) pair. A trace view can ask for visited states and taken transitions to be marked.
 */
import { type Chart, type ChartEdge, type ChartState, edgeLabel } from './describeChart.js';
import { mermaidId } from './mermaid.js';

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
export const esc = (text: string) =>
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
    const r = state.type === 'final' ? last + 1 : (rank.get(state.path) ?? last);
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
  const scale = Math.min(
    dx === 0 ? Infinity : box.w / 2 / Math.abs(dx),
    dy === 0 ? Infinity : box.h / 2 / Math.abs(dy),
  );
  return { x: cx + dx * scale, y: cy + dy * scale };
}

const center = (b: Box) => ({ x: b.x + b.w / 2, y: b.y + b.h / 2 });
const overlaps = (p: Box, q: Box) => p.x < q.x + q.w && q.x < p.x + p.w && p.y < q.y + q.h && q.y < p.y + p.h;
const BADGE_SPOTS = [0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82];

/** Marks for a trace view: visited states, the state the task ended in, and transitions taken. */
export interface SvgHighlight {
  /** State paths the task was in (`executing.writing`); a compound state counts when one of its children does. */
  visited: ReadonlySet<string>;
  /** The state the task is in now (or ended in). */
  current: string | null;
  /** Taken transitions as `source>target` state paths (`*` for root handlers). */
  taken: ReadonlySet<string>;
  /** Times each visited state was entered, shown next to its name. */
  visits?: ReadonlyMap<string, number>;
}

/** The chart as SVG. Without `highlight` the output is exactly the generated diagram's. */
export function toSvg(chart: Chart, highlight?: SvgHighlight): string {
  const mark = (path: string) =>
    !highlight ? '' : `${highlight.visited.has(path) ? ' visited' : ''}${highlight.current === path ? ' current' : ''}`;
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
    parts.push(`<g class="${cls}${mark(state.path)}" id="state-${esc(mermaidId(state.path))}">`);
    const about = [state.description, state.tags.length > 0 ? `tags: ${state.tags.join(', ')}` : null]
      .filter(Boolean)
      .join('\n');
    if (about) parts.push(`<title>${esc(about)}</title>`);
    parts.push(`<rect x="${fmt(b.x)}" y="${fmt(b.y)}" width="${fmt(b.w)}" height="${fmt(b.h)}" rx="8"/>`);
    if (state.type === 'final') {
      parts.push(
        `<rect class="inner" x="${fmt(b.x + 4)}" y="${fmt(b.y + 4)}" width="${fmt(b.w - 8)}" height="${fmt(b.h - 8)}" rx="5"/>`,
      );
    }
    const note = compound ? '' : noteOf(state);
    const nameY = compound ? b.y + 19 : note ? b.y + 21 : b.y + b.h / 2 + 5;
    const nameX = compound ? b.x + 12 + (state.key.length * NAME_CHAR) / 2 : b.x + b.w / 2;
    parts.push(`<text class="name" x="${fmt(nameX)}" y="${fmt(nameY)}">${esc(state.key)}</text>`);
    const visits = highlight?.visits?.get(state.path) ?? 0;
    if (visits > 1 && !compound)
      parts.push(`<text class="visits" x="${fmt(b.x + b.w - 14)}" y="${fmt(b.y + 14)}">×${visits}</text>`);
    if (note && state.type !== 'final')
      parts.push(`<text class="note" x="${fmt(b.x + b.w / 2)}" y="${fmt(b.y + 38)}">${esc(note)}</text>`);
    parts.push('</g>');
  }
  const any = boxes.get('*');
  if (any) {
    parts.push(
      `<g class="any"><rect x="${fmt(any.x)}" y="${fmt(any.y)}" width="${fmt(any.w)}" height="${fmt(any.h)}" rx="8"/>`,
    );
    parts.push(`<text class="name" x="${fmt(any.x + any.w / 2)}" y="${fmt(any.y + 21)}">any state</text>`);
    parts.push(`<text class="note" x="${fmt(any.x + any.w / 2)}" y="${fmt(any.y + 38)}">root handlers</text></g>`);
  }
  // Initial markers: a dot above each initial state.
  const initials = [chart.initial, ...chart.states.map((s) => s.initial)].filter((p): p is string => p !== null);
  for (const path of initials) {
    const b = boxes.get(path)!;
    const cx = b.x + b.w / 2;
    parts.push(`<circle class="initial" cx="${fmt(cx)}" cy="${fmt(b.y - 20)}" r="5"/>`);
    parts.push(
      `<path class="edge" d="M${fmt(cx)} ${fmt(b.y - 15)} L${fmt(cx)} ${fmt(b.y - 1)}" marker-end="url(#arrow)"/>`,
    );
  }
  // One arrow per (source, target), labelled with the numbers of the transitions it stands for.
  const groups = new Map<string, ChartEdge[]>();
  for (const edge of chart.edges) {
    const key = `${edge.source}>${edge.target ?? edge.source}`;
    groups.set(key, [...(groups.get(key) ?? []), edge]);
  }
  const occupied = chart.states
    .filter((st) => st.type !== 'compound' && st.type !== 'parallel')
    .map((st) => boxes.get(st.path)!);
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
      const c = {
        x: (a.x + b.x) / 2 - ((b.y - a.y) / len) * offset,
        y: (a.y + b.y) / 2 + ((b.x - a.x) / len) * offset,
      };
      d = `M${fmt(a.x)} ${fmt(a.y)} Q${fmt(c.x)} ${fmt(c.y)} ${fmt(b.x)} ${fmt(b.y)}`;
      const at = (t: number) => ({
        x: (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c.x + t ** 2 * b.x,
        y: (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c.y + t ** 2 * b.y,
      });
      // The first point along the curve, from its middle outwards, where the badge covers no state or badge.
      const free = BADGE_SPOTS.map(at).find(
        (p) => !occupied.some((o) => overlaps(o, { x: p.x - w / 2, y: p.y - 8, w, h: 16 })),
      );
      badge = free ?? at(0.5);
    }
    occupied.push({ x: badge.x - w / 2, y: badge.y - 8, w, h: 16 });
    const title = edges.map((e) => `${e.index}. ${e.source} → ${e.target ?? e.source}: ${edgeLabel(e)}`).join('\n');
    const stays = edges.every((e) => e.target === null);
    const taken = highlight?.taken.has(key) === true;
    parts.push(`<g class="transition${taken ? ' taken' : ''}"><title>${esc(title)}</title>`);
    parts.push(
      `<path class="edge${stays ? ' stays' : ''}" d="${d}" marker-end="url(#${taken ? 'arrow-taken' : 'arrow'})"/>`,
    );
    parts.push(
      `<rect class="badge" x="${fmt(badge.x - w / 2)}" y="${fmt(badge.y - 8)}" width="${fmt(w)}" height="16" rx="8"/>`,
    );
    parts.push(`<text class="badge" x="${fmt(badge.x)}" y="${fmt(badge.y + 3.5)}">${label}</text></g>`);
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${esc(chart.id)} statechart">`,
    highlight
      ? '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker><marker id="arrow-taken" class="taken" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker></defs>'
      : '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker></defs>',
    ...parts,
    '</svg>',
  ].join('\n');
}
