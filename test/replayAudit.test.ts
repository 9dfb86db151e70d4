/**
 * replayAudit: the pure fold that reconstructs a task at step N from its audit journal. Checked against every
 * snapshot the runtime actually persisted (state, budgets, pending confirmation), for every demo scenario, plus
 * hand-made journals for the paths the scenarios do not take.
 */
import { describe, expect, it } from 'vitest';
import type { AgentContext, BudgetLimits } from '../machines/context.js';
import type { AuditEntry } from '../machines/journal.js';
import { agentMachine } from '../machines/agentMachine.js';
import { EMPTY_REPLAY, foldAuditEntry, replayAudit } from '../src/audit/replayAudit.js';
import { chartMoves, moveToken } from '../src/audit/chartMoves.js';
import { SCENARIO_NAMES, scenarios } from '../examples/booking/scenarios.js';
import { E17, harness } from './support/harness.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { TransientModelError, type AgentModel } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/index.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { describeChart } from '../src/visualize/describeChart.js';

/** The long scenario's read rounds in these sweeps, which cost the square of a task's length (default 300). */
const SHORT_LONG = 40;

/** A memory store that remembers what each save made durable: journal length, state, budgets, pending confirmation. */
class RecordingStore extends MemoryStore {
  readonly saves: { taskId: string; audit: number; stateValue: string; context: AgentContext }[] = [];

  override async save(request: SaveRequest): Promise<void> {
    await super.save(request);
    const { envelope } = request;
    this.saves.push({
      taskId: envelope.taskId,
      audit: envelope.journal.audit,
      stateValue: envelope.summary.stateValue,
      context: structuredClone(envelope.snapshot.context),
    });
  }
}

const chartStates = new Set(describeChart(agentMachine).states.map((s) => s.path));

describe('replayAudit', () => {
  describe.each(SCENARIO_NAMES)('on the %s scenario', (name) => {
    it('matches every persisted snapshot: state, budgets used, pending confirmation', async () => {
      const store = new RecordingStore();
      const result = await scenarios[name]({ store, longRounds: SHORT_LONG });
      // The scenario's task only (a sub-task's child is a task of its own, with its own journal).
      const saves = store.saves.filter((save) => save.taskId === result.status.taskId);
      expect(saves.length).toBeGreaterThanOrEqual(3);
      for (const save of saves) {
        const replayed = replayAudit(result.audit, save.audit);
        const where = `${name} after ${save.audit} entries`;
        expect(replayed.state, where).toBe(save.stateValue);
        expect(replayed.budget.used, where).toEqual(save.context.budget.used);
        expect(replayed.pendingConfirmation?.id ?? null, where).toBe(save.context.pendingConfirmation?.id ?? null);
        expect(replayed.pendingConfirmation?.argsHash ?? null, where).toBe(
          save.context.pendingConfirmation?.argsHash ?? null,
        );
        expect(replayed.turn, where).toBe(save.context.turn);
      }
    });

    it('visits only states of the chart and takes only transitions the chart has', async () => {
      const result = await scenarios[name]({ store: new MemoryStore(), longRounds: SHORT_LONG });
      const replayed = replayAudit(result.audit);
      const edges = describeChart(agentMachine).edges;
      for (const state of replayed.visited) expect(chartStates, state).toContain(state);
      for (const t of replayed.transitions) {
        const exists = edges.some(
          (e) =>
            (e.source === t.from || e.source === '*' || t.from.startsWith(`${e.source}.`)) &&
            (e.target === t.to ||
              (e.target === null && t.from === t.to) ||
              (e.target !== null && t.to.startsWith(`${e.target}.`))),
        );
        expect(exists, `${t.from} → ${t.to}`).toBe(true);
      }
      expect(replayed.status).toBe(result.status.state);
      expect(replayed.outcome?.reason.code).toBe(result.status.outcome?.reason.code);
    });
  });

  it('is a fold: replaying N entries equals folding them one by one, and does not mutate its input', async () => {
    const { audit } = await scenarios.refund({ store: new MemoryStore() });
    const frozen = JSON.stringify(audit);
    let folded = EMPTY_REPLAY;
    for (const [seq, entry] of audit.entries()) {
      const before = JSON.stringify(folded);
      folded = foldAuditEntry(folded, entry, seq);
      expect(folded).toEqual(replayAudit(audit, seq + 1));
      if (seq > 0) expect(JSON.stringify(replayAudit(audit, seq))).toBe(before);
    }
    expect(JSON.stringify(audit)).toBe(frozen);
    expect(replayAudit(audit, 0)).toEqual(EMPTY_REPLAY);
    expect(replayAudit(audit, 10_000)).toEqual(replayAudit(audit));
  });

  it('shows the refund at its first confirmation: waiting, budgets so far, the gate decisions up to it', async () => {
    const { audit } = await scenarios.refund({ store: new MemoryStore() });
    const n = audit.findIndex((e) => e.kind === 'confirmation' && e.action === 'requested') + 1;
    const at = replayAudit(audit, n);
    expect(at.status).toBe('waiting_for_confirmation');
    expect(at.state).toBe('executing.awaitingConfirmation');
    expect(at.pendingConfirmation).toMatchObject({ id: 'refund-1/t3.c1.r1', tool: 'refund_order', request: 1 });
    expect(at.budget.used).toMatchObject({ modelTurns: 3, toolCalls: 1, writes: 0, money: 0 });
    expect(at.lastResults).toEqual([
      expect.objectContaining({
        tool: 'refund_order',
        result: null,
        effect: null,
        argsHash: at.pendingConfirmation!.argsHash,
      }),
    ]);
    expect(
      at.decisions
        .filter((d) => d.kind === 'gate' && d.callId !== null)
        .map((d) => `${d.tool} ${d.name} ${d.decision}`),
    ).toEqual([
      'get_order schema pass',
      'get_order mandate pass',
      'get_order business pass',
      'get_order permission pass',
      'refund_order schema pass',
      'refund_order mandate reject',
      'refund_order schema pass',
      'refund_order mandate pass',
      'refund_order business pass',
      'refund_order permission pass',
    ]);
    // get_order declares no business rules, and checks the order's tenant (resource permission); 999.00 is outside
    // the mandate (at most 199.00); refund_order validates the amount.
    // One state judges a call's synchronous gates; only an asynchronous hook leaves it (and comes back to it).
    const vetting = (...states: string[]) => [
      'vetting.judging',
      ...states.map((s) => `vetting.${s}`),
      'vetting.judging',
    ];
    expect(at.visited).toEqual([
      // Reads that may run start from vetting.judging; the last reads' results go straight on to the next turn.
      ...['deciding', 'thinking', ...vetting('authorizing'), 'executing.reading'],
      // The refusal at the mandate is a transition of vetting.judging to itself.
      ...['thinking', ...vetting(), 'executing.selecting'],
      ...['deciding', 'thinking', ...vetting('validating'), 'executing.selecting', 'executing.awaitingConfirmation'],
    ]);
  });

  it('shows the rejected call as the last result after the user rejects it', async () => {
    // A model that proposes 150.00 (within the mandate, not what the customer agreed to): E17 rejects it.
    const model = () =>
      scriptedModel([
        reply.call('get_order', { order_id: 'O-1001' }),
        reply.call('refund_order', { order_id: 'O-1001', amount_cents: 15_000, reason: 'broken' }),
        reply.call('refund_order', { order_id: 'O-1001', amount_cents: 19_900, reason: 'broken' }),
        reply.answer('Refunded 199.00.'),
      ]);
    const { audit } = await scenarios.refund({ store: new MemoryStore(), model });
    const n = audit.findIndex((e) => e.kind === 'confirmation' && e.action === 'rejected') + 1;
    const at = replayAudit(audit, n);
    expect(at.state).toBe('executing.selecting');
    expect(at.pendingConfirmation).toBeNull();
    expect(at.lastResults).toEqual([
      expect.objectContaining({ tool: 'refund_order', result: 'confirmation_rejected', gate: 'confirmation' }),
    ]);
    expect(
      at.decisions.filter((d) => d.kind === 'confirmation').map((d) => `${d.name}${d.code ? ` ${d.code}` : ''}`),
    ).toEqual(['requested', 'refused wrong_user', 'rejected confirmation_rejected']);
  });

  it('follows a lost write through reconciling to the lookup that found it', async () => {
    const { audit } = await scenarios.lostResponse({ store: new MemoryStore() });
    const replayed = replayAudit(audit);
    expect(replayed.visited).toContain('executing.reconciling');
    expect(replayed.transitions).toContainEqual(
      expect.objectContaining({ from: 'executing.writing', to: 'executing.reconciling' }),
    );
    expect(replayed.transitions).toContainEqual(
      expect.objectContaining({ from: 'executing.reconciling', to: 'executing.selecting' }),
    );
    expect(replayed.decisions.filter((d) => d.kind === 'lookup').map((d) => d.decision)).toEqual(['found']);
    expect(replayed.state).toBe('done');
  });

  describe('on hand-made journals written before transitions were recorded', () => {
    const limits: BudgetLimits = {
      modelTurns: 5,
      toolCalls: 5,
      writes: 2,
      retries: 3,
      tokens: 10_000,
      costMicros: 0,
      money: 0,
      wallClockMs: 60_000,
    };
    const started: AuditEntry = {
      at: 1,
      turn: 0,
      kind: 'task_started',
      userId: 'E17',
      tenantId: 'acme',
      scopes: [],
      goal: 'g',
      mandate: null,
      limits,
      policyVersion: '1',
    };
    const requested = (turn: number): AuditEntry => ({
      at: 2,
      turn,
      kind: 'model_requested',
      reservation: { tokens: 1_000, costMicros: 0 },
    });
    const output = (turn: number, out: string, tokens = 100): AuditEntry => ({
      at: 3,
      turn,
      kind: 'model_output',
      output: out,
      usage: { inputTokens: tokens, outputTokens: 0, costMicros: 0 },
      calls: out === 'model.toolsProposed' ? 1 : 0,
    });

    it('folds the question and the answer, and leaves the state unknown (the journal has no record of it)', () => {
      const journal: AuditEntry[] = [
        started,
        requested(1),
        output(1, 'model.askedUser'),
        { at: 4, turn: 1, kind: 'user_answered', userId: 'E17' },
        requested(2),
      ];
      expect(replayAudit(journal, 3)).toMatchObject({ state: null, recorded: false, waitingForAnswer: true });
      expect(replayAudit(journal, 4)).toMatchObject({ state: null, recorded: false, waitingForAnswer: false });
      expect(replayAudit(journal)).toMatchObject({
        state: null,
        visited: [],
        transitions: [],
        turn: 2,
        budget: { used: { modelTurns: 2, tokens: 1_100 } },
      });
    });

    it('counts settled tokens after unusable output, and takes the current state for the last step only', () => {
      const journal: AuditEntry[] = [started, requested(1), output(1, 'model.invalidOutput', 40), requested(2)];
      expect(replayAudit(journal).budget.used.tokens).toBe(1_040);
      expect(replayAudit(journal, 3, 'thinking').state).toBeNull();
      expect(replayAudit(journal, 4, 'thinking')).toMatchObject({ state: 'thinking', recorded: false });
    });

    it('goes to review when a write stays unknown, without counting the last lookup as a retry', () => {
      const write = { callId: 'c1', tool: 'refund_order', idempotencyKey: 'idem_1' };
      const journal: AuditEntry[] = [
        started,
        requested(1),
        output(1, 'model.toolsProposed'),
        {
          at: 4,
          turn: 1,
          kind: 'gate',
          gate: 'protocol',
          decision: 'pass',
          callId: null,
          tool: null,
          argsHash: null,
          code: null,
          summary: null,
        },
        {
          at: 5,
          turn: 1,
          kind: 'tool_started',
          ...write,
          effect: 'write',
          argsHash: 'h',
          args: {},
          attempt: 1,
          confirmationId: null,
          money: 0,
        },
        { at: 6, turn: 1, kind: 'tool_finished', ...write, code: 'timeout', durationMs: 5, attempts: 1 },
        { at: 7, turn: 1, kind: 'write_lookup', ...write, result: 'inconclusive', durationMs: 1 },
        { at: 8, turn: 1, kind: 'write_lookup', ...write, result: 'inconclusive', durationMs: 1 },
        {
          at: 9,
          turn: 1,
          kind: 'review',
          action: 'held',
          ...write,
          userId: null,
          scope: null,
          code: 'write_outcome_unknown',
          summary: 'unknown',
        },
      ];
      expect(replayAudit(journal, 7).budget.used.retries).toBe(1);
      const end = replayAudit(journal, journal.length, 'reviewRequired');
      expect(end).toMatchObject({
        state: 'reviewRequired',
        status: 'review_required',
        budget: { used: { retries: 1, writes: 1, toolCalls: 1 } },
      });
      expect(end.lastResults).toEqual([expect.objectContaining({ callId: 'c1', result: 'timeout', effect: 'write' })]);
    });
  });
});

describe('replayAudit on recorded transitions', () => {
  const chart = chartMoves(agentMachine);
  const token = (source: string, event: string, target: string | null) => {
    const index = chart.moves.findIndex((m) => m.source === source && m.event === event && m.target === target);
    expect(index, `${source} ${event} ${target}`).toBeGreaterThanOrEqual(0);
    return moveToken(index);
  };
  const started = { at: 1, turn: 0, kind: 'task_started', userId: 'E17', tenantId: 'acme', scopes: [], goal: 'g' };
  const journal = (fingerprint: string, second: string): AuditEntry[] =>
    [
      { ...started, moves: `${fingerprint}/` },
      { at: 2, turn: 1, kind: 'model_requested', reservation: { tokens: 0, costMicros: 0 }, moves: second },
    ] as AuditEntry[];

  it('reads the state, the event, the guard and the chart number of each transition from the chart', () => {
    const replayed = replayAudit(journal(chart.fingerprint, token('deciding', 'always', 'thinking')));
    expect(replayed).toMatchObject({ state: 'thinking', status: 'running', recorded: true, chart: chart.fingerprint });
    expect(replayed.visited).toEqual(['deciding', 'thinking']);
    const edge = describeChart(agentMachine).edges[replayed.transitions[0]!.edge! - 1]!;
    expect(replayed.transitions).toEqual([
      { from: 'deciding', to: 'thinking', seq: 1, event: 'always', guard: null, edge: edge.index },
    ]);
    expect([edge.source, edge.target, edge.fallback]).toEqual(['deciding', 'thinking', true]);
  });

  it('does not read a journal recorded by another chart, nor a transition this chart does not have', () => {
    expect(replayAudit(journal('otherchart', token('deciding', 'always', 'thinking')))).toMatchObject({
      state: null,
      recorded: false,
    });
    expect(replayAudit(journal(chart.fingerprint, 'zz'))).toMatchObject({ state: null, recorded: false });
    expect(replayAudit(journal(chart.fingerprint, 'not moves'))).toMatchObject({ state: null, recorded: false });
  });

  it('calls a final state reached before its stop entry running, instead of failing', () => {
    const replayed = replayAudit(journal(chart.fingerprint, token('thinking', 'model.answered', 'answered')));
    expect(replayed).toMatchObject({ state: 'answered', status: 'running', outcome: null });
  });
});

describe('replayAudit through model outages', () => {
  /** A model that fails transiently `failures` times, then answers. */
  const flaky = (failures: number): AgentModel => {
    let calls = 0;
    return {
      name: 'flaky',
      decide: async () => {
        calls += 1;
        if (calls <= failures) throw new TransientModelError('503 service unavailable');
        return reply.answer('All good.');
      },
    };
  };

  it.each([
    ['waits out an outage, then answers', 2, 'answered'],
    ['gives up after the outage limit (model_unavailable)', 100, 'failed'],
  ])(
    '%s: budgets match every save, reservations given back while waiting and on failure',
    async (_n, failures, end) => {
      const clock = new ManualClock();
      const store = new RecordingStore();
      const policy = { modelOutageMs: 2_500, modelWakeMs: { first: 1_000, longest: 1_000 } };
      const h = harness({ clock, store, model: flaky(failures), expirySweepMs: 0, limits: { retries: 0 }, policy });
      let status = await h.orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'outage' });
      for (let i = 0; i < 5 && status.state === 'waiting_for_model'; i++) {
        await clock.advance(1_000);
        await h.orchestrator.expireDue();
        status = await h.orchestrator.settled('outage');
      }
      expect(status.state).toBe(end);
      const audit = await h.orchestrator.audit('outage');
      expect(store.saves.length).toBeGreaterThanOrEqual(3);
      for (const save of store.saves) {
        const replayed = replayAudit(audit, save.audit);
        expect(replayed.state, `after ${save.audit} entries`).toBe(save.stateValue);
        expect(replayed.budget.used, `after ${save.audit} entries`).toEqual(save.context.budget.used);
      }
      // A turn that got no reply is charged nothing: the failed task used no tokens.
      if (end === 'failed') expect(status.budget.used.tokens).toBe(0);
    },
  );
});
