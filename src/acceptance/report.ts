/** The acceptance report for a person: a table per fault class, the metrics, and each failed invariant with its replay. */
import type { AcceptanceReport, ClassRow } from './types.js';

const COLUMNS: [string, (row: ClassRow) => string | number][] = [
  ['fault class', (r) => r.fault],
  ['tasks', (r) => r.tasks],
  ['injected', (r) => r.injected],
  ['blocked before execution', (r) => r.blockedBeforeExecution],
  ['asked a human', (r) => r.askedHuman],
  ['executed', (r) => r.executed],
  ['business records', (r) => r.businessRecords],
  ['duplicates', (r) => r.duplicates],
  ['wrong outcomes', (r) => r.wrongOutcomes],
  ['done', (r) => r.done],
  ['answered', (r) => r.answered],
  [
    'refused by',
    (r) =>
      Object.entries(r.refusedBy)
        .sort((a, b) => b[1] - a[1])
        .map(([gate, n]) => `${gate} ${n}`)
        .join(', ') || '-',
  ],
];

export function formatReport(
  report: AcceptanceReport,
  options: { maxFailures?: number; replay?: string } = {},
): string {
  const { metrics: m } = report;
  // `answered` shows only when a task ended so (a case without a success criterion); every shipped domain declares one.
  const columns = report.rows.some((r) => r.answered > 0) ? COLUMNS : COLUMNS.filter(([name]) => name !== 'answered');
  const lines = [
    `acceptance: ${report.domain} on the ${report.store} store, seed ${report.seed}: ${m.tasks} tasks, ${m.calls} tool calls proposed, ${(report.elapsedMs / 1000).toFixed(1)} s`,
    'injected: the faulty calls of a class; for hangs, lost responses and redeliveries, the executions the kit faulted (they are meant to run)',
    '',
    markdownTable(
      columns.map(([name]) => name),
      report.rows.map((row) => columns.map(([, cell]) => String(cell(row)))),
    ),
    '',
    markdownTable(
      ['metric', 'value'],
      [
        ['format rejection rate', percent(m.formatRejectionRate)],
        ['permission rejection accuracy', percent(m.permissionRejectionAccuracy)],
        ['unauthorized calls refused (recall)', percent(m.permissionRecall)],
        ['authorized calls refused at the permission gate', percent(m.falsePermissionRefusals)],
        ['unknown write outcomes (looked up)', String(m.unknownOutcomes)],
        ['held for a reviewer', String(m.heldForReview)],
        ['call latency P50 / P95 (calls the kit did not fault)', `${m.callLatencyMs.p50} / ${m.callLatencyMs.p95} ms`],
        [
          'faulted call latency P50 / P95 (the injected hangs)',
          `${m.faultedCallLatencyMs.p50} / ${m.faultedCallLatencyMs.p95} ms`,
        ],
        ['task latency P50 / P95', `${m.taskLatencyMs.p50} / ${m.taskLatencyMs.p95} ms`],
        ['duplicate executions', String(m.duplicateExecutions)],
        ['budget overruns', String(m.budgetOverruns)],
        ['unconfirmed side effects', String(m.unconfirmedSideEffects)],
        ['business records / distinct idempotency keys', `${m.businessRecords} / ${m.distinctIdempotencyKeys}`],
      ],
    ),
    '',
  ];
  if (report.ok) lines.push('every invariant held');
  else {
    const shown = report.failures.slice(0, options.maxFailures ?? 20);
    lines.push(`${report.failures.length} invariant failure(s):`);
    for (const f of shown)
      lines.push(`- ${f.invariant}: task ${f.taskId} (${f.fault}, index ${f.index}, task seed ${f.seed}): ${f.detail}`);
    if (report.failures.length > shown.length)
      lines.push(`- ... and ${report.failures.length - shown.length} more (see the JSON report)`);
    const first = report.failures.find((f) => f.index >= 0);
    if (first)
      lines.push(
        `replay the first: ${options.replay ? `${options.replay} ` : ''}--seed ${report.seed} --only ${first.index}`,
      );
  }
  return lines.join('\n');
}

function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [
    line(header),
    `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 2)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.map(line),
  ].join('\n');
}

const percent = (value: number | null) => (value === null ? 'n/a' : `${(value * 100).toFixed(2)}%`);
