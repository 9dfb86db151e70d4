/**
 * The re-check a gate asks itself (`recheckNow`), against the invoked re-check it replaces, in the sync-hook world
 * (`SYNC_CHART`): the booking's hooks are synchronous, it has no rate limit, and the host refreshes no session.
 *
 * - `lean`: the booking declares `recheckNow`; `rechecking.arguments` (and `recheckingResend`) ask its hooks.
 * - `stepwise`: the same tools without the flag, so the booking is re-checked in `rechecking.hooks` (or `resending`)
 *   by the invoked actor; the chart is wrapped so that, whenever it comes to rest there for the booking, the actor's
 *   answer is delivered at once, in the same move: the answer `src/runtime/actors/recheck.ts` gives when nothing it
 *   asks waits (the principal as at start, business validation unless resending, then resource permission once it
 *   passed, no rate limit), at the time of the move's event. The actor's state is then never a world of its own.
 *
 * The hooks answer the re-check (a call in phase `rechecking`) as `recheckHost.answers` says, set per exploration;
 * at vetting they answer as the proposal said (`syncHooks.ts`). Every transition of both charts emits its journal
 * into `journals`, so a test can compare what each records, move by move.
 */
import type { AnyActorScope } from 'xstate';
import { type CheckVerdict, type MachineEvent, type RecheckActorOutput, eventTime } from '../../machines/actors.js';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import type { AgentContext, CallState } from '../../machines/context.js';
import type { SyncCheck, ToolRules, Toolkit } from '../../machines/toolkit.js';
import { sha256Hex } from '../../src/hashing.js';
import { type Move, SYNC_RULES, type World, asSyncChart, capturing, valueOf } from './agentWorld.js';
import { everyMove } from './agentMoves.js';
import { type HookAnswers, type HookName, host } from './syncHooks.js';

type Snapshot = ReturnType<AgentMachine['getInitialSnapshot']>;

const PASS: HookAnswers = { validate: 'pass', authorize: 'pass' };
/** What the hooks answer at the re-check of every booking, and at the re-check of its resend (`pass` by default). */
export const recheckHost = { answers: PASS, resend: PASS };

/** At the re-check: the answer in force, asked afresh and logged; at vetting: the proposal's (`syncHook`). */
function rechecked(hook: HookName, vetting: SyncCheck): SyncCheck {
  return (call, context) => {
    const state = context.batch?.calls.find((c) => c.callId === call.callId);
    if (state?.phase !== 'rechecking') return vetting(call, context);
    host.asked.push({ callId: call.callId, hook, args: JSON.stringify(call.args), recheck: true });
    const answer = (state.resendAfter !== null ? recheckHost.resend : recheckHost.answers)[hook];
    if (answer === 'throws') throw new Error(`${hook} hook crashed at the re-check`);
    if (answer === 'unavailable')
      return { ok: false, code: 'unavailable', summary: `${hook} of ${call.callId} timed out at the re-check` };
    if (answer === 'pass') return { ok: true };
    return hook === 'validate'
      ? { ok: false, code: 'conflict', summary: `validate refused ${call.callId} at the re-check: room taken` }
      : { ok: false, code: 'permission_denied', summary: `authorize refused ${call.callId} at the re-check` };
  };
}

const BOOKING = SYNC_RULES.book_room!;
const booking = (recheckNow: boolean): ToolRules => ({
  ...BOOKING,
  validateNow: rechecked('validate', BOOKING.validateNow!),
  authorizeNow: rechecked('authorize', BOOKING.authorizeNow!),
  ...(recheckNow ? { recheckNow: true } : {}),
});
const toolkit = (recheckNow: boolean): Toolkit => {
  const rules: Record<string, ToolRules> = { ...SYNC_RULES, book_room: booking(recheckNow) };
  return { rules: (name) => rules[name], sha256: sha256Hex };
};
export const LEAN_TOOLKIT = toolkit(true);
export const STEPWISE_TOOLKIT = toolkit(false);

/** The journal entries (audit, transcript, replies) each move emitted, by the snapshot it reached. */
export const journals = new WeakMap<object, unknown[]>();

/** The hook's verdict as the actor's check gives it for a synchronous hook: a throw is `unavailable`. */
function asked(ask: SyncCheck | undefined, hook: HookName, call: CallState, context: AgentContext): CheckVerdict {
  if (!ask) return { ok: true };
  try {
    return ask({ callId: call.callId, tool: call.tool, args: call.args }, context);
  } catch {
    return { ok: false, code: 'unavailable', summary: `the ${hook} hook of ${call.tool} failed` };
  }
}

/** The invoked re-check's answer for the booking at rest in `rechecking.hooks` or `resending`, or null. */
function actorAnswer(snapshot: Snapshot, cause: MachineEvent): MachineEvent | null {
  const value = valueOf(snapshot);
  if (value !== 'executing.rechecking.hooks' && value !== 'executing.resending') return null;
  const { context } = snapshot;
  const call = context.batch?.calls.find((c) => c.callId === context.batch?.current);
  if (call?.tool !== 'book_room') return null;
  const rules = STEPWISE_TOOLKIT.rules('book_room')!;
  const pass: CheckVerdict = { ok: true };
  const business = value === 'executing.resending' ? pass : asked(rules.validateNow, 'validate', call, context);
  const permission = business.ok ? asked(rules.authorizeNow, 'authorize', call, context) : pass;
  const output: RecheckActorOutput = {
    callId: call.callId,
    at: eventTime(cause, context.startedAt),
    principal: context.principal,
    sessionError: null,
    business,
    permission,
    rate: pass,
    durationMs: 0,
  };
  return { type: 'xstate.done.actor.recheck', output };
}

/** `chart` with every move's journal kept (`journals`); `settle`: the booking's invoked re-check answered at once. */
function journaled(chart: AgentMachine, settle: boolean): AgentMachine {
  const wrapped = Object.create(chart) as AgentMachine;
  wrapped.transition = ((snapshot: Snapshot, event: MachineEvent, scope: AnyActorScope) => {
    const emitted: unknown[] = [];
    const used = capturing(scope, emitted);
    let next = chart.transition(snapshot, event as never, used) as Snapshot;
    // Answered until the chart rests elsewhere: a refused booking may bring the next one to its re-check.
    for (let answer = settle ? actorAnswer(next, event) : null; answer; answer = actorAnswer(next, event))
      next = chart.transition(next, answer as never, used) as Snapshot;
    journals.set(next, emitted);
    return next;
  }) as AgentMachine['transition'];
  return asSyncChart(wrapped);
}

/** The chart with the gate's own re-check; `mutant` replaces some of its guards or actions. */
export function leanChart(mutant?: Parameters<AgentMachine['provide']>[0]): AgentMachine {
  const chart = createAgentMachine(LEAN_TOOLKIT);
  return journaled(mutant ? (chart.provide(mutant) as AgentMachine) : chart, false);
}

/** The chart whose booking is re-checked by the invoked actor, answered within the move that reached it. */
export function stepwiseChart(): AgentMachine {
  return journaled(createAgentMachine(STEPWISE_TOOLKIT), true);
}

/**
 * The sync-hook world's alphabet (`syncAlphabet`) with the moves that bring a booking to be sent again: a write whose
 * outcome is unknown and a lookup that finds nothing, or one held for review and a reviewer's retry.
 */
const RESEND_KEEP = new Set([
  'recheck: pass',
  'write: ok',
  'write: unknown (timeout)',
  'write: needs review',
  'lookup: found',
  'lookup: not found',
  'reviewer: retry',
  'reviewer: not happened',
  'user: confirms',
  'validate: pass',
  'authorize: pass',
]);
export function resendMoves(world: World): Move[] {
  return everyMove(world).filter((m) => m.type.startsWith('model: ') || RESEND_KEEP.has(m.type));
}
