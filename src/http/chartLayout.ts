/**
 * The statechart of the live task page, laid out by elkjs (layered, with the compound states as nested boxes and
 * orthogonal edges routed around them) from the machine's own definition (`describeChart`). The browser only
 * draws the boxes and polylines it gets here. Transitions that do not change state (targetless, shown in the
 * timeline instead) and the root's any-state handlers are left out of the drawing; the transitions between one pair
 * of states are drawn as one edge labelled with their chart indices (its tooltip lists each with its guard), and
 * the page highlights an edge when the task went from its source to its target.
 *
 * elkjs is an optional peer: loaded when the chart is first asked for, then the layout is cached per machine.
 */
import type { AnyStateMachine } from 'xstate';
import { optionalPeer } from '../peers/optionalPeer.js';
import { type Chart, describeChart, edgeLabel } from '../visualize/describeChart.js';

export interface LaidOutState {
  path: string;
  key: string;
  parent: string | null;
  tags: string[];
  compound: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The transitions from one state to another, drawn as one edge (a chart has several guarded ones between a pair). */
export interface LaidOutEdge {
  /** The chart indices of the transitions it stands for. */
  indices: number[];
  source: string;
  target: string;
  /** One line per transition: `12. always [not isWithinMandate] / refuseForMandate`. */
  labels: string[];
  /** The polyline, in chart coordinates. */
  points: { x: number; y: number }[];
  label: { x: number; y: number } | null;
}

export interface ChartLayout {
  id: string;
  width: number;
  height: number;
  states: LaidOutState[];
  edges: LaidOutEdge[];
}

interface ElkShapeOut {
  id: string;
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  children?: ElkShapeOut[];
  edges?: {
    id: string;
    sections?: { startPoint: Point; endPoint: Point; bendPoints?: Point[] }[];
    labels?: { x?: number; y?: number }[];
  }[];
}
type Point = { x: number; y: number };

const cache = new WeakMap<AnyStateMachine, Promise<ChartLayout>>();

/** The machine's chart, laid out (cached per machine). */
export function chartLayout(machine: AnyStateMachine): Promise<ChartLayout> {
  let layout = cache.get(machine);
  if (!layout) {
    layout = layOut(describeChart(machine));
    cache.set(machine, layout);
    layout.catch(() => cache.delete(machine));
  }
  return layout;
}

async function layOut(chart: Chart): Promise<ChartLayout> {
  const loaded = await optionalPeer(
    'elkjs',
    () => import('elkjs/lib/elk.bundled.js'),
    'the live task page (chart layout)',
  );
  // A CommonJS module: its constructor is the default import (or, through some loaders, the default's default).
  type Elk = { layout(graph: unknown): Promise<unknown> };
  const exported = loaded.default as unknown as { new (): Elk; default?: new () => Elk };
  const ELK = exported.default ?? exported;
  const elk = new ELK();
  const known = new Set(chart.states.map((s) => s.path));
  const compound = new Set(chart.states.flatMap((s) => (s.parent ? [s.parent] : [])));
  const nodeOf = (path: string): Record<string, unknown> => {
    const state = chart.states.find((s) => s.path === path)!;
    const children = chart.states.filter((s) => s.parent === path).map((s) => nodeOf(s.path));
    return children.length > 0
      ? { id: path, children, layoutOptions: { 'elk.padding': '[top=28,left=12,bottom=12,right=12]' } }
      : { id: path, width: Math.max(70, state.key.length * 7.5 + 24), height: 30 };
  };
  const groups = new Map<string, Chart['edges']>();
  for (const e of chart.edges) {
    if (e.source === '*' || e.target === null || !known.has(e.source) || !known.has(e.target)) continue;
    const key = `${e.source}→${e.target}`;
    groups.set(key, [...(groups.get(key) ?? []), e]);
  }
  const drawn = [...groups.values()].map((edges) => ({
    id: `e${edges[0]!.index}`,
    source: edges[0]!.source,
    target: edges[0]!.target!,
    edges,
    text: edges.map((e) => e.index).join(','),
  }));
  const graph = {
    id: 'root',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.layered.spacing.nodeNodeBetweenLayers': '36',
      'elk.spacing.nodeNode': '24',
      'elk.spacing.edgeNode': '12',
      'elk.spacing.edgeEdge': '6',
      'elk.json.shapeCoords': 'ROOT',
      'elk.json.edgeCoords': 'ROOT',
    },
    children: chart.states.filter((s) => s.parent === null).map((s) => nodeOf(s.path)),
    edges: drawn.map((e) => ({
      id: e.id,
      sources: [e.source],
      targets: [e.target],
      labels: [{ text: e.text, width: 8 + e.text.length * 6, height: 14 }],
    })),
  };
  const out = (await elk.layout(graph as never)) as unknown as ElkShapeOut;
  const states: LaidOutState[] = [];
  const walk = (node: ElkShapeOut) => {
    for (const child of node.children ?? []) {
      const state = chart.states.find((s) => s.path === child.id)!;
      states.push({
        path: state.path,
        key: state.key,
        parent: state.parent,
        tags: state.tags,
        compound: compound.has(state.path),
        x: child.x ?? 0,
        y: child.y ?? 0,
        width: child.width ?? 0,
        height: child.height ?? 0,
      });
      walk(child);
    }
  };
  walk(out);
  const byId = new Map((out.edges ?? []).map((e) => [e.id, e]));
  const edges: LaidOutEdge[] = drawn.map((e) => {
    const laid = byId.get(e.id);
    const points = (laid?.sections ?? []).flatMap((s) => [s.startPoint, ...(s.bendPoints ?? []), s.endPoint]);
    const label = laid?.labels?.[0];
    return {
      indices: e.edges.map((edge) => edge.index),
      source: e.source,
      target: e.target,
      labels: e.edges.map((edge) => `${edge.index}. ${edgeLabel(edge)}`),
      points,
      label: label && label.x !== undefined && label.y !== undefined ? { x: label.x, y: label.y } : null,
    };
  });
  return {
    id: chart.id,
    width: Math.ceil((out.width ?? 0) + 2),
    height: Math.ceil((out.height ?? 0) + 2),
    states,
    edges,
  };
}
