/**
 * A task's trace as one self-contained HTML page (no scripts, no network): the agent statechart with the states
 * the task visited and the transitions it took highlighted (derived from its audit journal by `replayAudit`),
 * the state it ended in emphasized, and a timeline of the host's decisions: gate checks (pass / reject),
 * tool calls and their results, write lookups, confirmations, and the stop reason.
 */
import type { AnyStateMachine } from 'xstate';
import type { AuditEntry } from '../../machines/journal.js';
import { agentMachine } from '../../machines/agentMachine.js';
import { type ReplayedTask, replayAudit } from '../audit/replayAudit.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { CHART_STYLE } from './chartHtml.js';
import { esc, toSvg } from './chartSvg.js';
import { type Chart, describeChart } from './describeChart.js';
import { clip, jsonPreview as json } from '../text.js';

/** The page's colours; tests look for them in screenshots. */
export const TRACE_COLORS = {
  /** Fill of a state the task visited. */
  visited: '#fde68a',
  /** Fill of the state the task is in, or ended in. */
  current: '#f59e0b',
  /** Stroke of a transition taken. */
  taken: '#c2410c',
  /** Background of a gate pass, a tool ok, a granted confirmation. */
  pass: '#bbf7d0',
  /** Background of a gate rejection, a failed tool, a refused or rejected confirmation. */
  reject: '#fca5a5',
  /** Background of a stop, an unknown outcome, a pending request. */
  warn: '#fed7aa',
} as const;

export interface TraceInput {
  status: Pick<TaskStatus, 'taskId' | 'goal' | 'state' | 'stateValue' | 'outcome' | 'principal' | 'revision'>;
  audit: readonly AuditEntry[];
  /** Default: the agent machine. */
  machine?: AnyStateMachine;
}

/** Renders the trace page. Pure: the same input gives the same page. */
export function renderTraceHtml({ status, audit, machine = agentMachine }: TraceInput): string {
  const chart = describeChart(machine);
  const replayed = replayAudit(audit, audit.length, status.stateValue);
  const svg = toSvg(chart, highlightOf(chart, replayed));
  const outcome = status.outcome;
  const verdict = outcome
    ? `<span class="pill ${outcome.status === 'done' ? 'pass' : outcome.status === 'cancelled' ? 'warn' : 'reject'}">${esc(outcome.status)}</span> <code>${esc(outcome.reason.code)}</code>: ${esc(outcome.reason.message)}`
    : `<span class="pill warn">${esc(status.state)}</span> in <code>${esc(status.stateValue)}</code> (not finished)`;
  const visits = countVisits(replayed.visited);
  const start = audit[0]?.at ?? 0;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Trace of ${esc(status.taskId)}</title>
<style>
${CHART_STYLE}
${TRACE_STYLE}
</style>
</head>
<body>
<h1>Trace of <code>${esc(status.taskId)}</code></h1>
<p class="goal">${esc(status.goal)}</p>
<p>User <code>${esc(status.principal.userId)}@${esc(status.principal.tenantId)}</code> · revision ${status.revision} · ${audit.length} audit entries · outcome: ${verdict}</p>
<p class="legend"><span class="swatch visited"></span> visited state <span class="swatch current"></span> ${outcome ? 'final' : 'current'} state <span class="swatch taken"></span> transition taken <span class="swatch pass"></span> pass / ok <span class="swatch reject"></span> reject / failure <span class="swatch warn"></span> stop / pending / unknown</p>
<div class="wrap">
${svg}
</div>
<h2>Path</h2>
<p class="path">${replayed.visited.map((s, i) => `<code class="${i === replayed.visited.length - 1 ? 'last' : ''}">${esc(s)}</code>`).join(' → ')}</p>
<p>States entered: ${[...visits].map(([s, n]) => `<code>${esc(s)}</code>${n > 1 ? ` ×${n}` : ''}`).join(', ')}</p>
<h2>Timeline</h2>
<table class="timeline">
<thead><tr><th>#</th><th>turn</th><th>+ms</th><th>what</th><th>tool</th><th>decision</th><th>detail</th></tr></thead>
<tbody>
${audit
  .map((entry, seq) => timelineRow(entry, seq, start))
  .filter((row) => row !== null)
  .join('\n')}
</tbody>
</table>
</body>
</html>
`;
}

const TRACE_STYLE = `.goal{font-size:15px;color:#374151}
.state.visited rect,.final.visited rect{fill:${TRACE_COLORS.visited};stroke:#92400e;stroke-width:2}
.compound.visited>rect{stroke:#92400e;stroke-width:2}
.state.current rect,.final.current rect{fill:${TRACE_COLORS.current};stroke:#7c2d12;stroke-width:3.5}
.final.current rect.inner{fill:none;stroke:#7c2d12;stroke-width:2}
.transition.taken .edge{stroke:${TRACE_COLORS.taken};stroke-width:3}.transition.taken rect.badge{stroke:${TRACE_COLORS.taken};stroke-width:2}
marker.taken path{fill:${TRACE_COLORS.taken}}text.visits{font-size:11px;font-weight:700;fill:#7c2d12}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600}
.pass{background:${TRACE_COLORS.pass}}.reject{background:${TRACE_COLORS.reject}}.warn{background:${TRACE_COLORS.warn}}
table.timeline td.decision{font-weight:600}table.timeline tr.stop td{border-top:2px solid #7c2d12}
.legend .swatch{display:inline-block;width:14px;height:14px;border:1px solid #6b7280;vertical-align:-2px;margin-left:10px}
.swatch.visited{background:${TRACE_COLORS.visited}}.swatch.current{background:${TRACE_COLORS.current}}.swatch.taken{background:${TRACE_COLORS.taken}}
.swatch.pass{background:${TRACE_COLORS.pass}}.swatch.reject{background:${TRACE_COLORS.reject}}.swatch.warn{background:${TRACE_COLORS.warn}}
.path code.last{background:${TRACE_COLORS.current};padding:0 4px;border-radius:4px}`;

function highlightOf(chart: Chart, replayed: ReplayedTask) {
  const visited = new Set<string>();
  for (const state of replayed.visited) {
    const parts = state.split('.');
    for (let i = 1; i <= parts.length; i++) visited.add(parts.slice(0, i).join('.'));
  }
  const taken = new Set<string>();
  for (const t of replayed.transitions) {
    // The recorded transition's own arrow; for another chart than the agent's, the arrow its states name.
    const edge = t.edge === null ? undefined : chart.edges[t.edge - 1];
    const exact = edge && (edge.source === '*' || t.from === edge.source || t.from.startsWith(`${edge.source}.`));
    const key = exact ? `${edge.source}>${edge.target ?? edge.source}` : edgeKeyFor(chart, t.from, t.to);
    if (key) taken.add(key);
  }
  return { visited, current: replayed.state, taken, visits: countVisits(replayed.visited) };
}

/** The chart arrow (`source>target`) that stands for a move from `from` to `to`: the most specific one. */
function edgeKeyFor(chart: Chart, from: string, to: string): string | null {
  const ancestors = (path: string) => path.split('.').map((_, i, parts) => parts.slice(0, parts.length - i).join('.'));
  const sources = [...ancestors(from), '*'];
  const targets = ancestors(to);
  for (const source of sources) {
    for (const target of targets) {
      const edge = chart.edges.find((e) => e.source === source && (e.target ?? e.source) === target);
      if (edge) return `${edge.source}>${edge.target ?? edge.source}`;
    }
  }
  return null;
}

function countVisits(visited: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const state of visited) counts.set(state, (counts.get(state) ?? 0) + 1);
  return counts;
}

/** One timeline row, or null for entries the timeline leaves out (model requests, budget passes). */
function timelineRow(entry: AuditEntry, seq: number, start: number): string | null {
  const row = (what: string, tool: string | null, decision: string, cls: string, detail: string, rowClass = '') =>
    `<tr class="${entry.kind}${rowClass}"><td>${seq}</td><td>${entry.turn || ''}</td><td>${Math.max(0, entry.at - start)}</td><td>${esc(what)}</td><td>${tool ? `<code>${esc(tool)}</code>` : ''}</td><td class="decision ${cls}">${esc(decision)}</td><td>${detail}</td></tr>`;
  switch (entry.kind) {
    case 'task_started':
      return row(
        'start',
        null,
        'started',
        '',
        `${esc(entry.userId)}@${esc(entry.tenantId)} [${esc(entry.scopes.join(' '))}]: ${esc(entry.goal)}`,
      );
    case 'model_requested':
    case 'check_started':
      return null;
    case 'model_output':
      return row(
        'model',
        null,
        entry.output.replace('model.', ''),
        entry.output === 'model.invalidOutput' ? 'reject' : '',
        `${entry.calls} call(s), ${entry.usage.inputTokens + entry.usage.outputTokens} tokens`,
      );
    case 'gate':
      if (entry.gate === 'budget' && entry.decision === 'pass') return null;
      return row(
        `gate ${entry.gate}`,
        entry.tool,
        entry.decision,
        entry.decision === 'pass' ? 'pass' : entry.decision === 'reject' ? 'reject' : 'warn',
        `${entry.code ? `<code>${esc(entry.code)}</code> ` : ''}${esc(entry.summary ?? '')}`,
      );
    case 'tool_started':
      return row(
        `${entry.effect} started`,
        entry.tool,
        entry.attempt > 1 ? `attempt ${entry.attempt}` : 'started',
        '',
        `<code>${esc(clip(json(entry.args), 160))}</code>${entry.idempotencyKey ? ` key <code>${esc(entry.idempotencyKey.slice(0, 16))}…</code>` : ''}`,
      );
    case 'tool_finished':
      return row(
        'tool result',
        entry.tool,
        entry.code,
        entry.code === 'ok' ? 'pass' : 'reject',
        `${entry.durationMs} ms${entry.attempts > 1 ? `, ${entry.attempts} attempts` : ''}`,
      );
    case 'write_lookup':
      return row(
        'lookup',
        entry.tool,
        entry.result,
        entry.result === 'found' ? 'pass' : 'warn',
        `by key <code>${esc(entry.idempotencyKey.slice(0, 16))}…</code>`,
      );
    case 'confirmation': {
      const cls =
        entry.action === 'granted' || entry.action === 'approved'
          ? 'pass'
          : entry.action === 'requested'
            ? 'warn'
            : 'reject';
      const detail =
        entry.action === 'requested'
          ? `<code>${esc(entry.confirmationId)}</code> for args <code>${esc(entry.argsHash.slice(0, 19))}…</code>${entry.expiresAt ? `, expires ${new Date(entry.expiresAt).toISOString()}` : ''}`
          : `<code>${esc(entry.confirmationId)}</code>${entry.userId ? ` by ${esc(entry.userId)}` : ''}${entry.decidedAs === 'approver' ? ` (approver, ${esc(entry.scope ?? '')})` : ''}${entry.code ? ` <code>${esc(entry.code)}</code>` : ''}`;
      return row('confirmation', entry.tool, entry.action, cls, detail);
    }
    case 'user_answered':
      return row('user', null, 'answered', 'pass', esc(entry.userId));
    case 'review':
      return row(
        `review ${entry.action}`,
        entry.tool,
        entry.code,
        entry.action === 'resolved' ? 'pass' : entry.action === 'held' ? 'warn' : 'reject',
        `${entry.userId ? `${esc(entry.userId)}: ` : ''}${esc(entry.summary)}`,
      );
    case 'model_outage':
      return row(
        'model outage',
        null,
        entry.action,
        entry.action === 'gave_up' ? 'reject' : 'warn',
        `${entry.attempts} attempt(s)${entry.wakeAt ? `, next ${new Date(entry.wakeAt).toISOString()}` : ''}: ${esc(entry.error)}`,
      );
    case 'question_expired':
      return row('user', null, 'no answer', 'warn', esc(entry.question));
    case 'cancel_requested':
      return row(
        'cancel',
        null,
        entry.deferred ? 'deferred' : 'requested',
        'warn',
        `by ${esc(entry.by)}${entry.reason ? `: ${esc(entry.reason)}` : ''}`,
      );
    case 'presence':
      return row(
        'user',
        null,
        entry.action,
        entry.action === 'expired' ? 'reject' : 'warn',
        `${esc(entry.userId)}${entry.expiresAt ? ` (the pause ends the task at ${new Date(entry.expiresAt).toISOString()})` : ''}`,
      );
    case 'compensation_started':
      return row(
        'undo',
        null,
        'compensating',
        'warn',
        `${esc(entry.status)} (<code>${esc(entry.reason.code)}</code>): undoing ${entry.compensations.length} write(s) first`,
      );
    case 'compensation_finished':
      return row(
        'undo',
        null,
        'compensated',
        entry.compensations.every((c) => c.result === 'compensated') ? 'pass' : 'reject',
        entry.compensations
          .map(
            (c) =>
              `<code>${esc(c.tool)}</code> ${esc(c.ofCallId)}: ${esc(c.result)}${c.code ? ` (${esc(c.code)})` : ''}`,
          )
          .join('; '),
      );
    case 'plan': {
      const steps = entry.steps?.map((s) => `${s.id} <code>${esc(s.tool)}</code>`).join(', ');
      const detail = entry.step
        ? `${esc(entry.step.id)}: ${esc(entry.step.status)}${entry.step.evidence.length ? ` (${esc(entry.step.evidence.join(', '))})` : ''}`
        : `${entry.code ? `<code>${esc(entry.code)}</code>: ` : ''}${esc(entry.summary)}${steps ? ` [${steps}]` : ''}`;
      const cls =
        entry.action === 'adopted' || entry.step?.status === 'succeeded'
          ? 'pass'
          : entry.action === 'proposed'
            ? 'warn'
            : 'reject';
      return row(
        'plan',
        entry.step?.tool ?? null,
        entry.action === 'step' ? (entry.step?.status ?? 'step') : entry.action,
        cls,
        detail,
      );
    }
    case 'workflow':
      return row(
        'flow',
        null,
        entry.action,
        entry.action === 'refused' || entry.code ? 'reject' : entry.action === 'ended' ? 'warn' : 'pass',
        `${esc(entry.workflow)}${entry.step ? ` ${esc(entry.step)}` : ''}${entry.next ? ` → ${esc(entry.next)}` : ''}: ${esc(entry.summary)}`,
      );
    case 'subtask':
      return row(
        'sub-task',
        entry.tool,
        entry.action,
        entry.status && entry.status !== 'done' ? 'warn' : 'pass',
        `${esc(entry.childTaskId)}: ${esc(entry.summary)}`,
      );
    case 'compaction_started':
      return null;
    case 'compaction':
      return row(
        'compact',
        null,
        entry.replaced ? 'compacted' : 'nothing to compact',
        entry.fallback ? 'warn' : 'pass',
        `${esc(entry.reason)}: ${entry.replaced ? `entries ${entry.replaced.fromIndex}-${entry.replaced.toIndex - 1} (${entry.replaced.turns} turns) ` : ''}by ${esc(entry.source ?? 'nobody')}${entry.fallback ? ` (fallback: ${esc(entry.fallback)})` : ''}, ~${entry.tokensBefore} → ~${entry.tokensAfter} tokens`,
      );
    case 'task_stopped':
      return row(
        'stop',
        null,
        entry.status,
        entry.status === 'done' ? 'pass' : entry.status === 'cancelled' ? 'warn' : 'reject',
        `<code>${esc(entry.reason.code)}</code>: ${esc(entry.reason.message)}`,
        ' stop',
      );
  }
}
