/**
 * Where values from outside enter a task in the runtime, sealed before the chart sees them: the model's output (its
 * text, each call's name, id and arguments), tools' results and summaries, lookups, and host hooks' verdicts.
 * Opening happens here too, right before a hook or a tool that takes the sensitive values runs. Text is sealed
 * before it is cut to its bound: a cut must never leave part of a value that a whole one would have matched.
 */
import type { CallOutcome, CheckVerdict } from '../../machines/actors.js';
import type { AgentContext, Json } from '../../machines/context.js';
import type { ModelEvent } from '../../machines/events.js';
import type { OpenedToken, Privacy, SealFailure, SealScope } from '../privacy/privacy.js';
import type { Tool } from '../tool.js';
import { sealFailureText } from './sealedParse.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import { DECISION_TOOL } from '../../machines/workflows.js';

/** The task whose values a sealing step seals and opens. */
export function scopeOf(
  context: Pick<AgentContext, 'taskId' | 'startedAt'> & { principal: { tenantId: string } },
): SealScope {
  return { taskId: context.taskId, tenantId: context.principal.tenantId, startedAt: context.startedAt };
}

/** What sealing reads of the installed tools (the runtime's `ToolRegistry`). */
export interface SealingTools {
  readonly privacy: Privacy;
  get(name: string): Tool | undefined;
  sensitiveArgumentNames(): readonly string[];
}

/** A model event as the task may record it: every text redacted, every call's name, id and arguments sealed. */
export function sealModelEvent(registry: SealingTools, scope: SealScope, event: ModelEvent): ModelEvent {
  const { privacy } = registry;
  switch (event.type) {
    case 'model.toolsProposed':
      return {
        ...event,
        text: event.text === null ? null : privacy.text(scope, event.text),
        calls: event.calls.map((call) => ({
          ...(call.callId === undefined ? {} : { callId: privacy.text(scope, call.callId) }),
          name: privacy.text(scope, call.name),
          arguments: privacy.arguments(scope, call.arguments, registry.get(call.name)?.sensitive?.args ?? []),
        })),
      };
    case 'model.planProposed':
    case 'model.decided':
      return {
        ...event,
        text: event.text === null ? null : privacy.text(scope, event.text),
        callId: privacy.text(scope, event.callId),
        // A plan names tools and purposes, a decision a choice: no tool's argument values; redacted like any text.
        arguments: privacy.text(scope, event.arguments),
      };
    case 'model.answered':
      return { ...event, text: privacy.text(scope, event.text) };
    case 'model.askedUser':
      return { ...event, question: privacy.text(scope, event.question) };
    case 'model.refused':
      return { ...event, reason: privacy.text(scope, event.reason) };
    case 'model.invalidOutput':
      // `detail` and `received` were sealed before they were cut (see the model actor).
      return event;
  }
}

/**
 * An unusable output as the audit may keep it. When a tool takes sensitive arguments and the output names one of
 * their fields, the output may hold a value (in call arguments nobody could parse): it is kept whole as one token.
 */
export function sealReceived(registry: SealingTools, scope: SealScope, received: string): string {
  const fields = registry.sensitiveArgumentNames();
  if (fields.some((field) => received.includes(field))) return registry.privacy.withheld(scope, 'received', received);
  return registry.privacy.text(scope, received);
}

/**
 * A model's text as a live view may see it while it is written (modelText.ts): redacted as an answer's, and withheld
 * whole, as `sealReceived` would keep it, once it names a field of a tool's sensitive arguments: until the turn ends
 * nobody knows whether it is an answer or an unusable output (a call written as text) that the audit withholds.
 */
export function sealLiveText(registry: SealingTools, scope: SealScope, text: string): string {
  const fields = registry.sensitiveArgumentNames();
  if (fields.some((field) => text.includes(field))) return LIVE_TEXT_WITHHELD;
  return registry.privacy.text(scope, text);
}

/** What a live view shows instead of a text that names a sensitive argument field. */
export const LIVE_TEXT_WITHHELD = '[the text is withheld while it is written: it names a sensitive field]';

/**
 * A tool call's arguments as a live view may see them while they are written: as live text (redacted as the stored
 * arguments of a tool without sensitive fields are), and withheld whole when the tool takes sensitive values (the
 * stored ones are sealed at their paths, which text that does not parse yet cannot show), is not named yet, names no
 * installed tool (the host's own, plans and decisions, are shown: their arguments are stored as redacted text), or
 * may still grow into the name of one that takes sensitive values (a name written in pieces: "pay", then "pay_card").
 */
export function sealLiveArguments(
  registry: SealingTools & { readonly names: readonly string[] },
  scope: SealScope,
  tool: string | null,
  text: string,
): string {
  const sensitive = (name: string) => (registry.get(name)?.sensitive?.args?.length ?? 0) > 0;
  if (
    tool === null ||
    (registry.get(tool) === undefined && tool !== PLAN_TOOL && tool !== DECISION_TOOL) ||
    sensitive(tool) ||
    registry.names.some((name) => name.startsWith(tool) && sensitive(name))
  )
    return LIVE_ARGUMENTS_WITHHELD;
  return sealLiveText(registry, scope, text);
}

/** What a live view shows instead of the arguments of a call to a tool that takes sensitive values (or is unknown). */
export const LIVE_ARGUMENTS_WITHHELD =
  '[the arguments are withheld while they are written: the tool takes sensitive values]';

/** How one call's texts and results are sealed: the task, the tool, and the values the call opened. */
export interface CallSealing {
  privacy: Privacy;
  scope: SealScope;
  tool: Tool;
  opened: readonly OpenedToken[];
}

/** Free text of a call (a summary, an error message): the values it opened sealed where quoted, then redacted. */
export function sealCallText(sealing: CallSealing, text: string): string {
  return sealing.privacy.echoes(sealing.scope, text, sealing.opened);
}

/**
 * A tool's outcome as the task may record it: its result sealed at the tool's sensitive output paths, every value
 * the call opened sealed wherever the result or a summary quotes it, and a code that quotes one replaced.
 */
export function sealOutcome(sealing: CallSealing, outcome: CallOutcome): CallOutcome {
  const { privacy, scope, tool, opened } = sealing;
  if (outcome.kind === 'ok')
    return { ...outcome, value: privacy.json(scope, outcome.value, tool.sensitive?.output ?? [], opened) };
  const summary = sealCallText(sealing, outcome.summary);
  if (outcome.kind !== 'error') return { ...outcome, summary };
  return { ...outcome, code: sealCode(sealing, outcome.code), summary };
}

/** A host hook's verdict, its summary and code sealed as a failure's are. */
export function sealVerdict(sealing: CallSealing, verdict: CheckVerdict): CheckVerdict {
  return verdict.ok
    ? verdict
    : { ...verdict, code: sealCode(sealing, verdict.code), summary: sealCallText(sealing, verdict.summary) };
}

/** A host's failure code is a short name; one that quotes a value is replaced, never sealed into the code. */
function sealCode(sealing: CallSealing, code: string): string {
  return sealCallText(sealing, code) === code ? code : 'redacted_code';
}

/**
 * A call's arguments as its tool takes them: the sealed values at its sensitive paths opened, if they belong to
 * this task. A failure names the field, never the value.
 */
export function openArguments(
  privacy: Privacy,
  scope: SealScope,
  tool: Tool,
  args: Json,
): { ok: true; value: Json; opened: OpenedToken[] } | { ok: false; summary: string; failure: SealFailure } {
  const opened = privacy.open(args, tool.sensitive?.args ?? [], scope);
  return opened.ok
    ? { ok: true, value: opened.value, opened: opened.opened }
    : { ok: false, summary: sealFailureText(opened.failure), failure: opened.failure };
}
