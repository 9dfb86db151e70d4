/**
 * Renders a task's audit trail as a short readable trace: one line per decision, the gate checks of a call
 * folded into one line, failures with their code and summary.
 */
import type { AuditEntry } from '../../machines/journal.js';
import { clip, jsonPreview } from '../text.js';

export interface TraceOptions {
  /** ANSI colours (default: false). */
  color?: boolean;
  /** Include budget/protocol passes and model requests (default: false). */
  verbose?: boolean;
  /** Line prefix (default: two spaces). */
  indent?: string;
}

const ANSI = {
  dim: '\x1b[2m',
  red: '\x1b[31m',
  green: '\x1b[32m',
  yellow: '\x1b[33m',
  cyan: '\x1b[36m',
  bold: '\x1b[1m',
  reset: '\x1b[0m',
};
type Paint = (style: keyof typeof ANSI, text: string) => string;

export function formatTrace(entries: readonly AuditEntry[], options: TraceOptions = {}): string {
  const paint: Paint = options.color ? (style, text) => `${ANSI[style]}${text}${ANSI.reset}` : (_s, text) => text;
  const indent = options.indent ?? '  ';
  const lines: string[] = [];
  const gates = new Map<string, string[]>();
  const flushGates = (callId: string | null) => {
    if (callId === null || !gates.has(callId)) return;
    lines.push(line(paint, indent, currentTurn, 'gates', gates.get(callId)!.join(' ')));
    gates.delete(callId);
  };
  let currentTurn = 0;

  for (const entry of entries) {
    currentTurn = entry.turn;
    switch (entry.kind) {
      case 'task_started':
        lines.push(
          line(
            paint,
            indent,
            0,
            'start',
            `${entry.userId}@${entry.tenantId} [${entry.scopes.join(' ')}]: ${entry.goal}`,
          ),
        );
        if (entry.mandate)
          lines.push(line(paint, indent, 0, 'mandate', `${entry.mandate.kind} ${compactArgs(entry.mandate.terms)}`));
        for (const loosened of entry.loosened ?? [])
          lines.push(line(paint, indent, 0, 'loosened', `${loosened.option}: ${loosened.reason}`));
        if (entry.warnings?.includes('no_success_criterion')) {
          lines.push(
            line(
              paint,
              indent,
              0,
              'warning',
              paint('yellow', 'no success criterion: this task may write, and can end answered at best, never done'),
            ),
          );
        }
        break;
      case 'model_requested':
        if (options.verbose)
          lines.push(line(paint, indent, entry.turn, 'model', paint('dim', `turn ${entry.turn} requested`)));
        break;
      case 'check_started':
        if (options.verbose)
          lines.push(line(paint, indent, entry.turn, 'check', paint('dim', `${entry.tool} ${entry.gate} hook asked`)));
        break;
      case 'model_output':
        lines.push(line(paint, indent, entry.turn, 'model', describeModelOutput(entry)));
        break;
      case 'gate': {
        if (entry.callId === null) {
          if (entry.decision !== 'pass' || options.verbose) {
            lines.push(
              line(paint, indent, entry.turn, entry.gate, mark(paint, entry.decision, entry.code, entry.summary)),
            );
          }
          break;
        }
        const key = entry.callId;
        const list = gates.get(key) ?? [`${paint('cyan', entry.tool ?? '?')}`];
        if (entry.decision === 'pass') list.push(`${entry.gate} ${paint('green', '✓')}`);
        else list.push(`${entry.gate} ${paint('red', '✗')} ${paint('red', `${entry.code}`)}: ${entry.summary}`);
        gates.set(key, list);
        if (entry.decision !== 'pass') flushGates(key);
        break;
      }
      case 'confirmation': {
        flushGates(entry.callId);
        const who = entry.userId
          ? ` by ${entry.userId}${entry.decidedAs === 'approver' ? ` (approver, ${entry.scope})` : ''}`
          : '';
        const detail =
          entry.action === 'requested'
            ? `asked ${entry.confirmationId} for ${entry.tool} ${short(entry.argsHash)}${entry.reasons ? ` (${entry.reasons.join(', ')})` : ''}, expires ${new Date(entry.expiresAt!).toISOString()}`
            : `${entry.action}${who} ${entry.confirmationId}${entry.code ? ` (${entry.code})` : ''}${entry.reason ? `: ${JSON.stringify(entry.reason)}` : ''}`;
        const style =
          entry.action === 'granted' || entry.action === 'approved'
            ? 'green'
            : entry.action === 'requested'
              ? 'yellow'
              : 'red';
        lines.push(line(paint, indent, entry.turn, 'confirm', paint(style, detail)));
        break;
      }
      case 'tool_started': {
        flushGates(entry.callId);
        const key = entry.idempotencyKey ? paint('dim', ` key ${short(entry.idempotencyKey)}`) : '';
        const attempt = entry.attempt > 1 ? paint('yellow', ` attempt ${entry.attempt}`) : '';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            entry.effect,
            `${paint('cyan', entry.tool)} ${compactArgs(entry.args)}${key}${attempt}`,
          ),
        );
        break;
      }
      case 'tool_finished': {
        const ok = entry.code === 'ok';
        const retries = entry.attempts > 1 ? ` after ${entry.attempts} attempts` : '';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            '',
            `${paint('dim', '→')} ${paint(ok ? 'green' : 'red', entry.code)} ${paint('dim', `${entry.durationMs} ms${retries}`)}`,
          ),
        );
        break;
      }
      case 'write_lookup':
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'lookup',
            `${paint('cyan', entry.tool)} by ${short(entry.idempotencyKey)} ${paint('dim', '→')} ${paint(entry.result === 'found' ? 'green' : 'yellow', entry.result)}`,
          ),
        );
        break;
      case 'user_answered':
        lines.push(line(paint, indent, entry.turn, 'user', `${entry.userId} answered`));
        break;
      case 'review': {
        const who = entry.userId ? ` by ${entry.userId}` : '';
        const style = entry.action === 'held' ? 'yellow' : entry.action === 'resolved' ? 'green' : 'red';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'review',
            `${paint(style, `${entry.action} ${entry.code}`)}${who}: ${entry.summary}`,
          ),
        );
        break;
      }
      case 'model_outage': {
        const when = entry.wakeAt ? `, next attempt ${new Date(entry.wakeAt).toISOString()}` : '';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'outage',
            `${paint('yellow', entry.action)} after ${entry.attempts} attempt(s)${when}: ${entry.error}`,
          ),
        );
        break;
      }
      case 'question_expired':
        lines.push(line(paint, indent, entry.turn, 'user', paint('yellow', `no answer in time: ${entry.question}`)));
        break;
      case 'cancel_requested':
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'cancel',
            `by ${entry.by}${entry.deferred ? ' (after the write in flight is settled)' : ''}`,
          ),
        );
        break;
      case 'presence':
        lines.push(line(paint, indent, entry.turn, 'user', paint('yellow', `${entry.userId} ${entry.action}`)));
        break;
      case 'plan': {
        for (const key of [...gates.keys()]) flushGates(key);
        const steps = entry.steps ? ` [${entry.steps.map((s) => `${s.id} ${s.tool}`).join(', ')}]` : '';
        const what =
          entry.action === 'step' && entry.step
            ? `${entry.planId} ${entry.step.id} ${entry.step.tool}: ${entry.step.status}${entry.step.evidence.length ? ` (${entry.step.evidence.join(', ')})` : ''}`
            : `${entry.planId ?? 'plan'} ${entry.action}${entry.code ? ` (${entry.code})` : ''}: ${entry.summary}${steps}`;
        const style =
          entry.action === 'adopted' || entry.step?.status === 'succeeded'
            ? 'green'
            : entry.action === 'proposed'
              ? 'yellow'
              : 'red';
        lines.push(line(paint, indent, entry.turn, 'plan', paint(style, what)));
        break;
      }
      case 'subtask': {
        for (const key of [...gates.keys()]) flushGates(key);
        const style = entry.status && entry.status !== 'done' ? 'yellow' : 'green';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'sub',
            paint(style, `${entry.tool} ${entry.action} ${entry.childTaskId}: ${entry.summary}`),
          ),
        );
        break;
      }
      case 'workflow': {
        for (const key of [...gates.keys()]) flushGates(key);
        const where = `${entry.workflow}${entry.step ? ` ${entry.step}` : ''}${entry.next ? ` → ${entry.next}` : ''}`;
        const style = entry.action === 'refused' || entry.code ? 'red' : entry.action === 'ended' ? 'yellow' : 'green';
        lines.push(line(paint, indent, entry.turn, 'flow', paint(style, `${where} ${entry.action}: ${entry.summary}`)));
        break;
      }
      case 'compensation_started':
      case 'compensation_finished': {
        for (const key of [...gates.keys()]) flushGates(key);
        const what =
          entry.kind === 'compensation_started'
            ? `${entry.status} (${entry.reason.code}): undoing ${entry.compensations.length} write(s) first`
            : entry.compensations
                .map((c) => `${c.tool} ${c.ofCallId} ${c.result}${c.code ? ` (${c.code})` : ''}`)
                .join('; ');
        lines.push(line(paint, indent, entry.turn, 'undo', paint('yellow', what)));
        break;
      }
      case 'compaction': {
        const what = entry.replaced
          ? `turns through ${entry.throughTurn} summarised by ${entry.source}${entry.fallback ? ` (fallback: ${entry.fallback})` : ''}, ~${entry.tokensBefore} → ~${entry.tokensAfter} tokens`
          : 'nothing old enough to summarise';
        lines.push(line(paint, indent, entry.turn, 'compact', paint('dim', `${entry.reason}: ${what}`)));
        break;
      }
      case 'task_stopped': {
        for (const key of [...gates.keys()]) flushGates(key);
        const style = entry.status === 'done' ? 'green' : entry.status === 'cancelled' ? 'yellow' : 'red';
        lines.push(
          line(
            paint,
            indent,
            entry.turn,
            'stop',
            `${paint(style, paint('bold', entry.status))} ${paint(style, entry.reason.code)}: ${entry.reason.message}`,
          ),
        );
        break;
      }
    }
  }
  for (const key of [...gates.keys()]) flushGates(key);
  return lines.join('\n');
}

function line(paint: Paint, indent: string, turn: number, label: string, text: string): string {
  const t = turn > 0 ? `t${turn}` : '';
  return `${indent}${paint('dim', t.padEnd(4))}${paint('bold', label.padEnd(9))}${text}`;
}

function mark(paint: Paint, decision: string, code: string | null, summary: string | null): string {
  if (decision === 'pass') return paint('green', `✓ ${summary ?? ''}`);
  return `${paint('red', `✗ ${code ?? ''}`)}: ${summary ?? ''}`;
}

function describeModelOutput(entry: Extract<AuditEntry, { kind: 'model_output' }>): string {
  const tokens = entry.usage.inputTokens + entry.usage.outputTokens;
  const label: Record<string, string> = {
    'model.toolsProposed': `proposed ${entry.calls} call${entry.calls === 1 ? '' : 's'}`,
    'model.answered': 'answered',
    'model.askedUser': 'asked the user',
    'model.refused': 'refused',
    'model.invalidOutput': 'produced unusable output',
  };
  const compacted = entry.compaction
    ? `, asked again compacted (level ${entry.compaction.level}) after ${entry.compaction.after}`
    : '';
  return `${label[entry.output] ?? entry.output} (${tokens} tokens${compacted})`;
}

function compactArgs(args: unknown): string {
  return clip(jsonPreview(args), 120);
}

function short(hashOrKey: string): string {
  return hashOrKey.length > 20 ? `${hashOrKey.slice(0, 16)}…` : hashOrKey;
}
