/**
 * `npm run chart-history`: adds the agent chart's transition table to `src/audit/chartHistory.ts` when its fingerprint
 * is not there yet, so that journals recorded by this chart still replay after the chart changes (`replayAudit` reads
 * a journal with the table of the chart that wrote it). It only adds: a table once released is never rewritten or
 * dropped. test/chartHistory.test.ts fails until the current chart's table is in.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { agentMachine } from '../machines/agentMachine.js';
import { chartMoves } from '../src/audit/chartMoves.js';
import { CHART_HISTORY, encodeChartTable } from '../src/audit/chartHistory.js';

const file = new URL('../src/audit/chartHistory.ts', import.meta.url);
const chart = chartMoves(agentMachine);
if (CHART_HISTORY[chart.fingerprint] !== undefined) {
  console.log(`chart ${chart.fingerprint} is in src/audit/chartHistory.ts already`);
} else {
  const text = readFileSync(file, 'utf8');
  const marker = '  // -- next chart --';
  if (!text.includes(marker)) throw new Error(`src/audit/chartHistory.ts lost its marker line (${marker.trim()})`);
  const entry = `  ${JSON.stringify(chart.fingerprint)}:\n    ${JSON.stringify(encodeChartTable(chart))},\n`;
  const path = fileURLToPath(file);
  const options = { ...(await resolveConfig(path)), filepath: path };
  writeFileSync(file, await format(text.replace(marker, `${entry}${marker}`), options));
  console.log(`added chart ${chart.fingerprint} (${chart.moves.length} transitions) to src/audit/chartHistory.ts`);
}
