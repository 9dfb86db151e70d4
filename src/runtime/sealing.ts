/**
 * Where values from outside enter a task in the runtime, sealed before the chart sees them: the model's output (its
 * text, and each call's arguments at the tool's sensitive paths), tools' results and summaries, and host hooks'
 * verdicts. Opening happens here too, right before a hook or a tool that takes the sensitive values runs.
 */
import type { CallOutcome, CheckVerdict } from '../../machines/actors.js';
import type { Json } from '../../machines/context.js';
import type { ModelEvent } from '../../machines/events.js';
import type { OpenedToken, Privacy, SealFailure } from '../privacy/privacy.js';
import type { Tool } from '../tool.js';
import type { ToolRegistry } from './toolRegistry.js';
import { sealFailureText } from './toolRegistry.js';

/** A model event as the task may record it: every text redacted, every call's sensitive arguments sealed. */
export function sealModelEvent(registry: ToolRegistry, taskId: string, event: ModelEvent): ModelEvent {
  const { privacy } = registry;
  switch (event.type) {
    case 'model.toolsProposed':
      return {
        ...event,
        text: event.text === null ? null : privacy.text(taskId, event.text),
        calls: event.calls.map((call) => ({
          ...call,
          arguments: privacy.arguments(taskId, call.arguments, registry.get(call.name)?.sensitive?.args ?? []),
        })),
      };
    case 'model.answered':
      return { ...event, text: privacy.text(taskId, event.text) };
    case 'model.askedUser':
      return { ...event, question: privacy.text(taskId, event.question) };
    case 'model.refused':
      return { ...event, reason: privacy.text(taskId, event.reason) };
    case 'model.invalidOutput':
      // `received` was sealed before it was cut (see the model actor): cutting may have split a token, never a value.
      return { ...event, detail: privacy.text(taskId, event.detail) };
  }
}

/**
 * A tool's outcome as the task may record it: its result sealed at the tool's sensitive output paths; a failure's
 * summary redacted, with the values the call opened sealed again wherever it quotes them.
 */
export function sealOutcome(privacy: Privacy, taskId: string, tool: Tool, outcome: CallOutcome, opened: readonly OpenedToken[] = []): CallOutcome {
  if (outcome.kind === 'ok') return { ...outcome, value: privacy.json(taskId, outcome.value, tool.sensitive?.output ?? []) };
  return { ...outcome, summary: privacy.echoes(taskId, outcome.summary, opened) };
}

/** A host hook's verdict, its summary sealed as a failure's is. */
export function sealVerdict(privacy: Privacy, taskId: string, verdict: CheckVerdict, opened: readonly OpenedToken[] = []): CheckVerdict {
  return verdict.ok ? verdict : { ...verdict, summary: privacy.echoes(taskId, verdict.summary, opened) };
}

/**
 * A call's arguments as its tool takes them: the sealed values at its sensitive paths opened, if they belong to
 * this task. A failure names the field, never the value.
 */
export function openArguments(
  privacy: Privacy,
  taskId: string,
  tool: Tool,
  args: Json,
): { ok: true; value: Json; opened: OpenedToken[] } | { ok: false; summary: string; failure: SealFailure } {
  const opened = privacy.open(args, tool.sensitive?.args ?? [], taskId);
  return opened.ok ? { ok: true, value: opened.value, opened: opened.opened } : { ok: false, summary: sealFailureText(opened.failure), failure: opened.failure };
}
