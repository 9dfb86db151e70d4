/**
 * The sub-task world for the path exploration (P11). A parent task under a refund mandate (at most 100) may call
 * `delegate` (a sub-task tool: the child may use `lookup` and `refund`, its mandate is the amount asked, its share two
 * turns, two calls, one write and that money) or `delegate_admin` (its child would use `admin_tool`, which the
 * principal may not). The exploring model proposes a fitting delegation, a wider one, the inadmissible one, or an
 * answer; the child's start succeeds, fails, or leaves its outcome unknown (then it is looked up: found or not); the
 * child's end arrives as `subtask.finished` (done or failed, for the awaited child or another one); the task may be
 * cancelled or restarted anywhere. Everything is the chart's pure `transition`: no actor runs.
 *
 * P11 rules, read off the harness's own arithmetic, never off the machine's:
 * - a child starts only for a fitting delegation (tools within the parent's, amount within the mandate, share within
 *   the budget left), and its link is recorded before it starts, under the id the key gives;
 * - the task waits in `awaitingSubtask` exactly while one link runs for the call it works on;
 * - an outcome for another child changes nothing;
 * - `done` only after the awaited child's `done` came back;
 * - no budget counter passes its limit, and the child's unspent share comes back exactly;
 * - a restart in the wait stays in the wait; no state but a final one is a dead end.
 */
import { z } from 'zod';
import type { MachineEvent, ModelActorOutput } from '../../machines/actors.js';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import { type AgentContext, type AgentInput, type SubtaskShare, childTaskIdOf } from '../../machines/context.js';
import type { ModelEvent } from '../../machines/events.js';
import type { ToolRules, Toolkit } from '../../machines/toolkit.js';
import { sha256Hex } from '../../src/hashing.js';
import { FINAL_STATES, INPUT, restore, valueOf } from './agentWorld.js';
import { type Violation, inertScope } from './explore.js';

const MAX = 100;
const amount = z.strictObject({ cents: z.number().int().positive() });
const base = { validates: false, authorizes: false } as const;
const shareOf = (cents: number): SubtaskShare => ({
  modelTurns: 2,
  toolCalls: 2,
  writes: 1,
  retries: 0,
  tokens: 0,
  costMicros: 0,
  money: cents,
});

const delegateRules = (name: string, tools: string[]): ToolRules => ({
  ...base,
  name,
  effect: 'write',
  input: amount,
  scopes: [],
  confirm: { never: 'the child confirms its own writes' },
  mandate: (args: { cents: number }, mandate) =>
    args.cents <= (mandate.terms as { max: number }).max ? { ok: true } : { ok: false, summary: 'wider' },
  subtask: {
    tools,
    goal: (args: { cents: number }) => `refund ${args.cents}`,
    mandate: (args: { cents: number }, parent) =>
      parent && args.cents <= (parent.terms as { max: number }).max
        ? { ok: true, mandate: { kind: 'refund', terms: { max: args.cents } } }
        : { ok: false, code: 'wider_than_parent', summary: 'more than the parent may refund' },
    budget: (args: { cents: number }) => shareOf(args.cents),
    success: null,
  },
});

const RULES: Record<string, ToolRules> = {
  lookup: { ...base, name: 'lookup', effect: 'read', input: z.strictObject({}), scopes: ['orders:read'] },
  refund: {
    ...base,
    name: 'refund',
    effect: 'write',
    input: amount,
    scopes: ['refunds:write'],
    confirm: { never: 'test' },
    mandate: () => ({ ok: true }),
  },
  admin_tool: { ...base, name: 'admin_tool', effect: 'read', input: z.strictObject({}), scopes: ['admin'] },
  delegate: delegateRules('delegate', ['lookup', 'refund']),
  delegate_admin: delegateRules('delegate_admin', ['lookup', 'admin_tool']),
};

export const SUBTASK_TOOLKIT: Toolkit = { rules: (name) => RULES[name], sha256: sha256Hex };
export const SUBTASK_CHART: AgentMachine = createAgentMachine(SUBTASK_TOOLKIT);

export function subtaskChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  return SUBTASK_CHART.provide({ guards }) as AgentMachine;
}

/** The parent: three turns, five calls, two writes, 80 in money (the mandate: at most 100). */
export const SUBTASK_INPUT: AgentInput = {
  ...INPUT,
  taskId: 'parent',
  goal: 'refund the customer through a sub-task',
  principal: { userId: 'E17', tenantId: 'acme', scopes: ['orders:read', 'refunds:write'] },
  mandate: { kind: 'refund', terms: { max: MAX }, id: 'm-parent' },
  catalog: Object.fromEntries(
    Object.values(RULES).map((r) => [r.name, { effect: r.effect, sameKeyRetrySafe: r.subtask !== undefined }]),
  ),
  limits: { ...INPUT.limits, modelTurns: 3, toolCalls: 5, writes: 2, retries: 1, money: 80 },
  policy: { ...INPUT.policy, maxRejectedTurns: 2, maxCallsPerBatch: 1 },
  success: { tool: 'delegate', match: { status: 'done' } },
};

type Snapshot = ReturnType<AgentMachine['getInitialSnapshot']>;

export interface SubtaskWorld {
  machine: Snapshot;
  /** The harness's own record: the awaited child's `done` came back (and was delivered while it waited). */
  childDone: boolean;
}

interface Move {
  type: string;
  event?: MachineEvent;
  restart?: boolean;
}

const AT = SUBTASK_INPUT.startedAt + 1;
const USAGE = { inputTokens: 0, outputTokens: 0, costMicros: 0 };

function modelSays(event: ModelEvent): MachineEvent {
  const output: ModelActorOutput = { kind: 'replied', at: AT, retriesUsed: 0, event };
  return { type: 'xstate.done.actor.model', output };
}

const callsOf = (tool: string, cents: number) =>
  modelSays({
    type: 'model.toolsProposed',
    at: AT,
    calls: [{ callId: 'c1', name: tool, arguments: JSON.stringify({ cents }) }],
    text: null,
    usage: USAGE,
  });

/** What the child spent: within its share always (the child's own budget enforces it). */
const CHILD_USED: SubtaskShare = { ...shareOf(0), modelTurns: 1, toolCalls: 1, writes: 1 };

function currentCall(context: AgentContext) {
  return context.batch?.calls.find((c) => c.callId === context.batch?.current);
}

export function movesOf(world: SubtaskWorld): Move[] {
  const { machine } = world;
  const value = valueOf(machine);
  const context = machine.context;
  if (FINAL_STATES.has(value)) return [];
  const moves: Move[] = [];
  const call = currentCall(context);
  if (value === 'thinking') {
    moves.push({ type: 'model: delegates 50', event: callsOf('delegate', 50) });
    moves.push({ type: 'model: delegates 500 (wider)', event: callsOf('delegate', 500) });
    moves.push({ type: 'model: delegates 90 (more money than left)', event: callsOf('delegate', 90) });
    moves.push({ type: 'model: delegates to admin_tool', event: callsOf('delegate_admin', 10) });
    moves.push({
      type: 'model: answers',
      event: modelSays({ type: 'model.answered', at: AT, text: 'done', usage: USAGE }),
    });
  }
  if (value === 'executing.rechecking.hooks' || value === 'executing.resending') {
    const ok = { ok: true } as const;
    moves.push({
      type: 'recheck: ok',
      event: {
        type: 'xstate.done.actor.recheck',
        output: {
          callId: context.batch!.current!,
          at: AT,
          principal: context.principal,
          sessionError: null,
          business: ok,
          permission: ok,
          rate: ok,
          durationMs: 0,
        },
      },
    });
  }
  if (value === 'executing.writing' && call) {
    const childId = childTaskIdOf(sha256Hex, context.taskId, call.idempotencyKey!);
    const write = (outcome: Extract<MachineEvent, { type: 'xstate.done.actor.write' }>['output']['outcome']) => ({
      type: 'xstate.done.actor.write' as const,
      output: { at: AT, outcome, durationMs: 0 },
    });
    moves.push({ type: 'start: ok', event: write({ kind: 'ok', value: { child_task_id: childId } }) });
    moves.push({
      type: 'start: refused',
      event: write({ kind: 'error', code: 'subtask_not_started', summary: 'no capacity', retryable: false }),
    });
    moves.push({
      type: 'start: unknown',
      event: write({ kind: 'unknown', code: 'interrupted', summary: 'the process stopped' }),
    });
  }
  if (value === 'executing.reconciling' && call) {
    const childId = childTaskIdOf(sha256Hex, context.taskId, call.idempotencyKey!);
    const lookup = (result: Extract<MachineEvent, { type: 'xstate.done.actor.lookup' }>['output']['result']) => ({
      type: 'xstate.done.actor.lookup' as const,
      output: { at: AT, result, durationMs: 0 },
    });
    moves.push({ type: 'lookup: found', event: lookup({ kind: 'found', value: { child_task_id: childId } }) });
    moves.push({ type: 'lookup: not found', event: lookup({ kind: 'not_found' }) });
  }
  if (value === 'executing.awaitingSubtask') {
    const link = context.subtasks.find((l) => l.callId === call?.callId);
    const finished = (childTaskId: string, status: 'done' | 'failed'): MachineEvent => ({
      type: 'subtask.finished',
      at: AT,
      childTaskId,
      outcome: {
        status,
        code: status === 'done' ? 'goal_met' : 'goal_not_met',
        message: status,
        evidence: [],
        used: CHILD_USED,
        at: AT,
      },
    });
    if (link) {
      moves.push({ type: 'child: done', event: finished(link.childTaskId, 'done') });
      moves.push({ type: 'child: failed', event: finished(link.childTaskId, 'failed') });
    }
    moves.push({ type: 'another child: done', event: finished('sub_someone_else', 'done') });
    moves.push({ type: 'restart', restart: true });
  }
  if (value === 'reviewRequired')
    moves.push({
      type: 'reviewer: not happened',
      event: {
        type: 'review.resolved',
        at: AT,
        userId: 'R1',
        scopes: [context.policy.reviewScope],
        resolution: 'not_happened',
        result: null,
        note: null,
      },
    });
  if (context.cancelRequested === null)
    moves.push({
      type: 'task: cancelled',
      event: { type: 'task.cancelled', at: AT, reason: 'withdrawn', by: 'E17' },
    });
  return moves;
}

/** The harness's own judgement of a delegation: does the child fit the parent (tools, mandate, budget left)? */
function fits(context: AgentContext, tool: string, cents: number): boolean {
  const sub = RULES[tool]?.subtask;
  if (!sub) return false;
  const toolsOk = sub.tools.every((t) =>
    (RULES[t]?.scopes ?? ['?']).every((s) => context.principal.scopes.includes(s)),
  );
  const { limits, used } = context.budget;
  const share = shareOf(cents);
  const budgetOk =
    used.toolCalls + share.toolCalls + 1 <= limits.toolCalls &&
    used.writes + share.writes + 1 <= limits.writes &&
    used.modelTurns + share.modelTurns <= limits.modelTurns &&
    used.money + share.money <= limits.money;
  return toolsOk && cents <= MAX && budgetOk;
}

export interface SubtaskExploration {
  states: number;
  transitions: number;
  byValue: Record<string, number>;
  witnessed: Record<string, number>;
  violations: Violation[];
}

export function exploreSubtasks(chart: AgentMachine, options: { maxStates: number; maxViolations?: number }) {
  const scope = inertScope();
  const key = (w: SubtaskWorld) => JSON.stringify([w.machine.value, w.machine.context, w.childDone]);
  const first: SubtaskWorld = { machine: chart.getInitialSnapshot(scope, SUBTASK_INPUT), childDone: false };
  const seen = new Map<string, { parent: string | null; move: string }>([[key(first), { parent: null, move: '' }]]);
  const queue = [first];
  const violations: Violation[] = [];
  const byValue: Record<string, number> = {};
  const witnessed: Record<string, number> = {};
  const count = (what: string) => (witnessed[what] = (witnessed[what] ?? 0) + 1);
  const pathTo = (k: string, last: string): string[] => {
    const moves = [last];
    for (let at: string | null = k; at !== null;) {
      const node: { parent: string | null; move: string } = seen.get(at)!;
      if (node.parent !== null) moves.unshift(node.move);
      at = node.parent;
    }
    return moves;
  };
  let transitions = 0;
  for (let i = 0; i < queue.length; i++) {
    const world = queue[i]!;
    const from = key(world);
    const value = valueOf(world.machine);
    byValue[value] = (byValue[value] ?? 0) + 1;
    const moves = movesOf(world);
    if (moves.length === 0 && !FINAL_STATES.has(value))
      violations.push({ problem: `P11 dead end: ${value} has no move`, path: pathTo(from, '(none)') });
    for (const move of moves) {
      transitions++;
      let machine = world.machine;
      if (move.restart) machine = restore(machine, chart);
      if (move.event) machine = chart.transition(machine, move.event as never, scope);
      const next: SubtaskWorld = { machine, childDone: world.childDone };
      const problems = checkEdge(world, move, next, count);
      for (const problem of problems) violations.push({ problem, path: pathTo(from, move.type) });
      if (options.maxViolations && violations.length >= options.maxViolations)
        return { states: seen.size, transitions, byValue, witnessed, violations };
      const k = key(next);
      if (seen.has(k)) continue;
      if (seen.size >= options.maxStates) throw new Error(`more than ${options.maxStates} states`);
      seen.set(k, { parent: from, move: move.type });
      queue.push(next);
    }
  }
  return { states: seen.size, transitions, byValue, witnessed, violations };
}

function checkEdge(prev: SubtaskWorld, move: Move, next: SubtaskWorld, count: (what: string) => void): string[] {
  const problems: string[] = [];
  const [a, b] = [prev.machine.context, next.machine.context];
  const [from, to] = [valueOf(prev.machine), valueOf(next.machine)];
  const call = currentCall(b);
  // A child starts: the write of a sub-task tool's call begins.
  if (to === 'executing.writing' && from !== 'executing.writing' && call && RULES[call.tool]?.subtask) {
    const { cents } = call.args as { cents: number };
    const link = b.subtasks.find((l) => l.callId === call.callId);
    const firstSend = from === 'executing.rechecking.hooks';
    if (firstSend && !fits(a, call.tool, cents))
      problems.push(`P11 start: ${call.tool} ${cents} starts a child that does not fit the parent`);
    if (!link || link.childTaskId !== childTaskIdOf(sha256Hex, b.taskId, call.idempotencyKey!))
      problems.push(`P11 start: ${call.tool} starts without its link under the id its key gives`);
    count(`child started (${firstSend ? 'first send' : 'resend'})`);
  }
  // Waiting exactly while one link runs for the call worked on.
  const running = b.subtasks.filter((l) => l.status === 'running');
  const waits = to === 'executing.awaitingSubtask';
  const linked = call?.phase === 'awaitingSubtask' && running.length === 1 && running[0]!.callId === call.callId;
  if (waits !== linked && !FINAL_STATES.has(to))
    problems.push(`P11 wait: in ${to} with ${running.length} running link(s), call phase ${call?.phase ?? 'none'}`);
  if (waits && from !== to) count('waiting for the child');
  if (move.type === 'start: ok' && to === 'cancelled') count('cancel deferred in the start, applied on waiting');
  // A child that started is waited for; only a cancel (deferred while the start was in flight) ends the wait at once.
  if ((move.type === 'start: ok' || move.type === 'lookup: found') && !waits && to !== 'cancelled')
    problems.push(`P11 wait: the child started and the parent went on to ${to} without waiting for it`);
  if (move.type === 'another child: done' && JSON.stringify(a) !== JSON.stringify(b))
    problems.push("P11 outcome: another child's outcome changed the parent");
  if (move.type === 'child: done' && from === 'executing.awaitingSubtask' && to !== from) next.childDone = true;
  if (to === 'done' && from !== 'done' && !next.childDone)
    problems.push("P11 done: done without the awaited child's done");
  for (const key of ['modelTurns', 'toolCalls', 'writes', 'money'] as const)
    if (b.budget.used[key] > b.budget.limits[key])
      problems.push(`P11 budget: ${key} used ${b.budget.used[key]} of ${b.budget.limits[key]}`);
  if (move.type.startsWith('child:') && from === 'executing.awaitingSubtask' && to !== from) {
    const link = a.subtasks.find((l) => l.status === 'running')!;
    for (const key of ['modelTurns', 'toolCalls', 'writes', 'money'] as const) {
      // The next model turn may start in the same step: it is debited after the give-back.
      const turns = key === 'modelTurns' ? b.turn - a.turn : 0;
      const back = link.share[key] - CHILD_USED[key] - turns;
      if (a.budget.used[key] - b.budget.used[key] !== back)
        problems.push(`P11 budget: ${key} given back ${a.budget.used[key] - b.budget.used[key]}, not ${back}`);
    }
    count(`outcome taken: ${move.type}`);
  }
  // A start that did not happen gives the whole share back (the call itself stays spent).
  const unstarted = (l: { status: string }) => l.status === 'not_started';
  const released = b.subtasks.find(
    (l) => unstarted(l) && !a.subtasks.some((o) => o.callId === l.callId && unstarted(o)),
  );
  if (released) {
    for (const key of ['modelTurns', 'toolCalls', 'writes', 'money'] as const) {
      const turns = key === 'modelTurns' ? b.turn - a.turn : 0;
      if (a.budget.used[key] - b.budget.used[key] !== released.share[key] - turns)
        problems.push(
          `P11 budget: ${key} given back ${a.budget.used[key] - b.budget.used[key]} for a start that did not happen`,
        );
    }
    count(`share released: ${move.type}`);
  }
  if (
    (move.type === 'start: refused' || move.type === 'lookup: not found') &&
    b.subtasks.some((l) => l.status === 'starting') &&
    to !== 'executing.resending' &&
    // A reviewer says whether it happened: the share stays taken until then.
    to !== 'reviewRequired'
  )
    problems.push(`P11 budget: ${move.type} leaves the share taken in ${to}`);
  if (move.restart && to !== from) problems.push(`P11 restart: ${from} became ${to}`);
  if (move.restart) count('restart while waiting');
  if (move.type === 'task: cancelled' && from === 'executing.awaitingSubtask') {
    if (to !== 'cancelled') problems.push(`P11 cancel: waiting, a cancel ends in ${to}`);
    else if (!b.subtasks.some((l) => l.status === 'running')) problems.push('P11 cancel: the running link is lost');
    count('cancelled while waiting');
  }
  const refused = b.batch?.calls.find(
    (c) => c.observation && !c.observation.ok && !a.batch?.calls.find((o) => o.callId === c.callId && o.observation),
  );
  if (refused && !refused.observation!.ok) count(`refused: ${refused.observation!.code}`);
  if (b.outcome && !a.outcome) count(`stop: ${b.outcome.reason.code}`);
  return problems;
}
