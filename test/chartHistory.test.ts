/**
 * Journals recorded by an earlier chart replay after the chart changed: every chart a release records with keeps its
 * transition table in src/audit/chartHistory.ts (added by `npm run chart-history`, never rewritten), and the replay
 * reads a journal with the table of the chart that wrote it. The stored journal of agent/7
 * (test/fixtures.test.ts, `recorded-booking`) is the one written by a chart that is no longer current once it changes.
 */
import { describe, expect, it } from 'vitest';
import { agentMachine } from '../machines/agentMachine.js';
import { CHART_HISTORY, encodeChartTable, pastChart } from '../src/audit/chartHistory.js';
import { chartMoves } from '../src/audit/chartMoves.js';

describe('the chart history', () => {
  const current = chartMoves(agentMachine);

  it('holds the current chart: run `npm run chart-history` after changing the chart, and commit what it adds', () => {
    expect(Object.keys(CHART_HISTORY)).toContain(current.fingerprint);
    expect(CHART_HISTORY[current.fingerprint]).toBe(encodeChartTable(current));
  });

  it('reads a table back as the chart it was made from', () => {
    const read = pastChart(current.fingerprint)!;
    expect(read.initial).toBe(current.initial);
    const strip = (m: {
      index: number;
      source: string;
      event: string;
      guard: string | null;
      target: string | null;
    }) => ({
      index: m.index,
      source: m.source,
      event: m.event,
      guard: m.guard,
      target: m.target,
    });
    expect(read.moves.map(strip)).toEqual(current.moves.map(strip));
    expect(pastChart('not-a-chart')).toBeNull();
  });

  it('keeps every table it ever had readable, each with its initial state and numbered transitions', () => {
    for (const fingerprint of Object.keys(CHART_HISTORY)) {
      const chart = pastChart(fingerprint)!;
      expect(chart.initial).not.toBe('');
      expect(chart.moves.length).toBeGreaterThan(0);
      for (const move of chart.moves) expect(move.event).not.toBe('');
    }
  });
});
