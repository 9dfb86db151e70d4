// Draws the statechart from the layout the service computed with elkjs (GET /api/chart): compound states as
// nested boxes, transitions as orthogonal polylines with their chart index. highlight() marks the states visited,
// the current state and the transitions taken.
import { el } from './common.js';

const SVG = 'svg:';

export function drawChart(container, layout) {
  const svg = el(`${SVG}svg`, {
    viewBox: `0 0 ${layout.width} ${layout.height}`,
    width: layout.width,
    height: layout.height,
    class: 'chart',
    'data-testid': 'chart',
    role: 'img',
    'aria-label': `statechart ${layout.id}`,
  });
  const defs = el(
    `${SVG}defs`,
    {},
    el(
      `${SVG}marker`,
      {
        id: 'arrow',
        viewBox: '0 0 10 10',
        refX: 9,
        refY: 5,
        markerWidth: 7,
        markerHeight: 7,
        orient: 'auto-start-reverse',
      },
      el(`${SVG}path`, { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow-head' }),
    ),
    el(
      `${SVG}marker`,
      {
        id: 'arrow-taken',
        viewBox: '0 0 10 10',
        refX: 9,
        refY: 5,
        markerWidth: 7,
        markerHeight: 7,
        orient: 'auto-start-reverse',
      },
      el(`${SVG}path`, { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow-head taken' }),
    ),
  );
  svg.append(defs);
  const states = new Map();
  // Parents first (they come first in the layout), so children draw on top of them.
  for (const state of layout.states) {
    const group = el(`${SVG}g`, {
      class: `state${state.compound ? ' compound' : ''}${state.tags.includes('terminal') ? ' terminal' : ''}`,
      'data-state': state.path,
    });
    group.append(
      el(`${SVG}title`, {}, `${state.path}${state.tags.length ? ` (tags: ${state.tags.join(', ')})` : ''}`),
      el(`${SVG}rect`, {
        x: state.x,
        y: state.y,
        width: state.width,
        height: state.height,
        rx: state.compound ? 10 : 8,
      }),
      el(
        `${SVG}text`,
        state.compound
          ? { x: state.x + 10, y: state.y + 18, class: 'compound-label' }
          : { x: state.x + state.width / 2, y: state.y + state.height / 2 + 4, 'text-anchor': 'middle' },
        state.key,
      ),
    );
    svg.append(group);
    states.set(state.path, group);
  }
  const edges = [];
  for (const edge of layout.edges) {
    if (edge.points.length < 2) continue;
    const text = edge.indices.join(',');
    const group = el(
      `${SVG}g`,
      { class: 'edge', 'data-edge': text },
      el(`${SVG}title`, {}, edge.labels.join('\n')),
      el(`${SVG}polyline`, { points: edge.points.map((p) => `${p.x},${p.y}`).join(' '), 'marker-end': 'url(#arrow)' }),
    );
    if (edge.label) {
      group.append(
        el(`${SVG}rect`, {
          x: edge.label.x - 1,
          y: edge.label.y - 1,
          width: 8 + text.length * 6,
          height: 15,
          rx: 3,
          class: 'badge',
        }),
        el(`${SVG}text`, { x: edge.label.x + 3, y: edge.label.y + 11, class: 'badge-text' }, text),
      );
    }
    svg.append(group);
    edges.push({ edge, group });
  }
  container.replaceChildren(svg);

  return {
    /** { visited: [path...], current: path|null, transitions: [{ from, to }], final: boolean } */
    highlight({ visited, current, transitions, final }) {
      const seen = new Set();
      for (const path of visited) for (const ancestor of ancestors(path)) seen.add(ancestor);
      const active = new Set(current ? ancestors(current) : []);
      for (const [path, group] of states) {
        group.classList.toggle('visited', seen.has(path));
        group.classList.toggle('active', active.has(path) && path !== current);
        group.classList.toggle('current', path === current);
        group.classList.toggle('final', path === current && final);
      }
      const taken = new Set(transitions.map((t) => `${t.from}→${t.to}`));
      for (const { edge, group } of edges) {
        const isTaken = taken.has(`${edge.source}→${edge.target}`);
        group.classList.toggle('taken', isTaken);
        group.querySelector('polyline').setAttribute('marker-end', isTaken ? 'url(#arrow-taken)' : 'url(#arrow)');
      }
    },
  };
}

function ancestors(path) {
  const parts = path.split('.');
  return parts.map((_, i) => parts.slice(0, i + 1).join('.'));
}
