/**
 * `statechart-agent/visualize`: the chart as data and as pictures (Mermaid, a self-contained SVG/HTML page), and a
 * task's trace page: what `npm run visualize` and the `trace` CLI draw, for a host that wants them in its own tools.
 */
export {
  actionName,
  describeChart,
  describeGuard,
  edgeLabel,
  type Chart,
  type ChartEdge,
  type ChartState,
} from './describeChart.js';
export { toMermaid } from './mermaid.js';
export { toSvg, type SvgHighlight } from './chartSvg.js';
export { toHtml } from './chartHtml.js';
export { renderTraceHtml, type TraceInput } from './traceHtml.js';
