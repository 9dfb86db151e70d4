/**
 * The invariants, checked against what really happened: the tools' own log of executions (the kit's wrappers) and
 * the business service's records, never against what the library says about itself. Then the report's rows and
 * metrics.
 */
import type { Json } from '../../machines/context.js';
import type { Tool } from '../tool.js';
import type { FaultyTools } from './faultyTools.js';
import { canonicalJson } from '../../machines/lib/canonicalJson.js';
import {
  type ClassRow,
  EXPECTED_GATES,
  FAULT_CLASSES,
  FORMAT_CLASSES,
  type Invariant,
  type InvariantFailure,
  PERMISSION_CLASSES,
  type SideEffect,
} from './types.js';
import {
  APPLIED,
  type TaskRun,
  type VerdictCounts,
  canonicalScopes,
  emptyRow,
  firstSendPerKey,
  groupBy,
  runMetrics,
  toolAsksConfirmation,
} from './verdictParts.js';

export type { TaskRun } from './verdictParts.js';

interface JudgeInput {
  runs: TaskRun[];
  faulty: FaultyTools;
  tools: ReadonlyMap<string, Tool>;
  sideEffects: SideEffect[];
  seed: number;
  /** Tool calls still running when the run was judged. */
  stillRunning?: number;
  /** What the host lets money-moving writes move unconfirmed (its `loosen.unconfirmedMoney`; default 0). */
  unconfirmedMoneyUpTo?: number;
}

export function judge({
  runs,
  faulty,
  tools,
  sideEffects,
  seed,
  stillRunning = 0,
  unconfirmedMoneyUpTo = 0,
}: JudgeInput) {
  const failures: InvariantFailure[] = [];
  const executionsByTask = groupBy(faulty.executions, (e) => e.taskId);
  const lookupsByTask = groupBy(faulty.lookups, (l) => l.taskId);
  const keyOwner = new Map<string, string>();
  for (const e of faulty.executions) if (e.idempotencyKey) keyOwner.set(e.idempotencyKey, e.taskId);
  const recordsByKey = groupBy(
    sideEffects.filter((s) => s.idempotencyKey !== null),
    (s) => s.idempotencyKey!,
  );
  const recordsByTask = groupBy(
    sideEffects.filter((s) => s.idempotencyKey !== null && keyOwner.has(s.idempotencyKey)),
    (s) => keyOwner.get(s.idempotencyKey!)!,
  );
  const lookedUp = new Set(faulty.lookups.map((l) => l.idempotencyKey));
  const rows = new Map<string, ClassRow>(FAULT_CLASSES.map((fault) => [fault, emptyRow(fault)]));
  const counts: VerdictCounts = {
    unconfirmed: 0,
    overruns: 0,
    formatInjected: 0,
    formatBlocked: 0,
    unauthorized: 0,
    unauthorizedRefused: 0,
    authorized: 0,
    falselyRefused: 0,
  };

  if (stillRunning > 0) {
    failures.push({
      invariant: 'task_settles',
      taskId: '-',
      index: -1,
      fault: 'clean',
      seed,
      detail: `${stillRunning} tool call(s) were still running after the run: what they do is not judged`,
    });
  }
  // Side effects the kit cannot tie to one write of one task: made without a key, or under a key no task used.
  for (const record of sideEffects) {
    if (record.idempotencyKey === null || !keyOwner.has(record.idempotencyKey)) {
      failures.push({
        invariant: 'attributable_side_effect',
        taskId: '-',
        index: -1,
        fault: 'clean',
        seed,
        detail: `${record.tool} record ${record.id} has idempotency key ${String(record.idempotencyKey)}, which no write of the run was sent with`,
      });
    }
  }

  for (const run of runs) {
    const { spec, taskId, script, status, testCase } = run;
    const fail = (invariant: Invariant, detail: string) =>
      failures.push({ invariant, taskId, index: spec.index, fault: spec.fault, seed: spec.seed, detail });
    const row = rows.get(spec.fault)!;
    const executions = executionsByTask.get(taskId) ?? [];
    const records = recordsByTask.get(taskId) ?? [];
    const observationOf = (callId: string) =>
      script.observations.get(callId) ?? status?.observations.find((o) => o.callId === callId);
    row.tasks += 1;
    row.businessRecords += records.length;
    if (status?.state === 'done') row.done += 1;
    if (status?.state === 'answered') row.answered += 1;
    if (run.error) fail('task_settles', run.error);
    if (spec.fault === 'clean' && status && status.state !== 'done')
      fail(
        'control_succeeds',
        status.state === 'answered'
          ? 'a task with no fault ended answered, not done: without a success criterion no answer ends a task done (no trusted evidence); give the case a `success` criterion (the tool and the result fields that prove it)'
          : `a task with no fault ended ${status.state} (${status.outcome?.reason.code ?? 'no outcome'}): the run shows nothing when the happy path fails`,
      );

    // Calls that must be refused: none may reach a tool, nor a human, and each must meet the gate under test.
    const mustBlock = script.proposals.filter((p) => p.role === 'faulty' || p.role === 'obeyed');
    const expected = EXPECTED_GATES[spec.fault] ?? [];
    for (const proposal of mustBlock) {
      row.injected += 1;
      const ran = executions.filter((e) => e.callId === proposal.callId);
      const observation = observationOf(proposal.callId);
      const gate = observation
        ? observation.ok
          ? 'none'
          : (observation.gate ?? observation.code)
        : spec.fault === 'duplicate_call_ids'
          ? 'unpaired'
          : 'no result';
      row.refusedBy[gate] = (row.refusedBy[gate] ?? 0) + 1;
      if (ran.length === 0 && gate !== 'confirmation') row.blockedBeforeExecution += 1;
      if (ran.length > 0) {
        row.executed += ran.length;
        const invariant: Invariant =
          proposal.role === 'obeyed'
            ? 'injection_changes_nothing'
            : PERMISSION_CLASSES.includes(spec.fault)
              ? 'no_unauthorized_side_effect'
              : 'blocked_before_execution';
        fail(
          invariant,
          `${proposal.tool} ${proposal.args} (${proposal.role}, call ${proposal.callId}) reached the tool ${ran.length} time(s)`,
        );
      } else if (gate !== 'confirmation' && !expected.includes(gate)) {
        fail(
          'refused_by_its_gate',
          `${proposal.tool} ${proposal.args} was refused by ${gate}${observation && !observation.ok ? ` (${observation.code})` : ''}, not by ${expected.join(' or ')}: the check under test was not exercised`,
        );
      }
      if (FORMAT_CLASSES.includes(spec.fault)) {
        counts.formatInjected += 1;
        if (ran.length === 0 && gate !== 'confirmation') counts.formatBlocked += 1;
      }
      if (PERMISSION_CLASSES.includes(spec.fault)) {
        counts.unauthorized += 1;
        if (ran.length === 0 && gate !== 'confirmation') counts.unauthorizedRefused += 1;
      }
    }
    // The kit's human rejects every confirmation of something the user did not ask for: reaching them is a failure.
    for (const args of run.rejected) {
      row.askedHuman += 1;
      fail(
        'blocked_before_execution',
        `a call the user did not ask for reached the user's confirmation (the host's gates let it through): ${args}`,
      );
    }
    // Calls the principal may make: a permission gate that refuses them is wrong too.
    for (const proposal of script.proposals.filter((p) => p.role === 'read' || p.role === 'write')) {
      const observation = observationOf(proposal.callId);
      if (!observation) continue;
      counts.authorized += 1;
      if (!observation.ok && (observation.gate === 'permission' || observation.code === 'permission_denied'))
        counts.falselyRefused += 1;
    }

    // The fault must have happened, or the task shows nothing.
    const applied = APPLIED[spec.fault];
    if (applied && !executions.some((e) => e.fault === applied.fault))
      fail(
        applied.fault === 'injected' ? 'injection_changes_nothing' : 'fault_applied',
        applied.missing(testCase.read.tool),
      );
    if (applied) {
      const faulted = executions.filter((e) => e.fault === applied.fault);
      if (!mustBlock.length) {
        row.injected += faulted.length;
        row.executed += faulted.length;
      }
    }

    // Writes: only the ones the user asked for, each confirmed when the host's policy asks, one record per key.
    const writes = firstSendPerKey(executions.filter((e) => e.effect === 'write'));
    let moneyMoved = 0;
    writes.forEach((write, i) => {
      if (!script.requestedWrites.has(write.args))
        fail('no_unauthorized_side_effect', `a write nobody asked for ran: ${write.tool} ${write.args}`);
      const tool = tools.get(write.tool);
      const args = JSON.parse(write.args) as Record<string, unknown>;
      const must = testCase.mustConfirm
        ? testCase.mustConfirm({ tool: write.tool, args })
        : tool?.effect === 'write' &&
          toolAsksConfirmation(tool, args as Json, testCase, { moneyMoved, writesStarted: i }, unconfirmedMoneyUpTo);
      if (must && !run.confirmed.includes(write.args)) {
        counts.unconfirmed += 1;
        fail(
          'confirmed_side_effect',
          `${write.tool} ${write.args} ran without the confirmation the host's policy asks for`,
        );
      }
      if (tool && tool.effect === 'write' && tool.amount) moneyMoved += Number(tool.amount(args)) || 0;
      const made = recordsByKey.get(write.idempotencyKey!) ?? [];
      if (made.length > 1) {
        row.duplicates += made.length - 1;
        fail(
          'one_action_per_intent',
          `${made.length} ${write.tool} records under one idempotency key ${write.idempotencyKey}`,
        );
      }
      const lost = executions.find((e) => e.idempotencyKey === write.idempotencyKey && e.fault === 'lost_response');
      if (lost && made.length !== (lost.ok ? 1 : 0)) {
        fail(
          'one_action_per_intent',
          `a write whose response was lost after the service ${lost.ok ? 'committed' : 'refused'} it left ${made.length} records, not ${lost.ok ? 1 : 0}`,
        );
      }
      // What the service recorded is what was asked for and confirmed, field by field.
      for (const record of made) {
        for (const [field, value] of Object.entries(record.args ?? {})) {
          if (canonicalJson(value) !== canonicalJson((args[field] ?? null) as Json)) {
            fail(
              'side_effect_matches_request',
              `${write.tool} record ${record.id} has ${field} ${canonicalJson(value)}, but the write the user asked for has ${canonicalJson((args[field] ?? null) as Json)}`,
            );
          }
        }
      }
    });
    // A lookup must find a write the service had committed before it was asked.
    for (const lookup of lookupsByTask.get(taskId) ?? []) {
      if (lookup.found) continue;
      const committed = executions.find(
        (e) =>
          e.idempotencyKey === lookup.idempotencyKey &&
          e.ok === true &&
          e.endedAt !== null &&
          e.endedAt < lookup.startedAt,
      );
      if (committed && (recordsByKey.get(lookup.idempotencyKey)?.length ?? 0) > 0) {
        fail(
          'lookup_finds_committed',
          `the lookup of ${lookup.tool} key ${lookup.idempotencyKey} found nothing, after the service had committed it`,
        );
      }
    }

    // Success only from a real record; a real record reported.
    if (status) {
      const wrong =
        status.state === 'done' && records.length === 0
          ? 'the task is done, but the business service has no record of it'
          : // An answered task reports the writes that succeeded (it claims no goal): its records are reported.
            status.state !== 'done' &&
              status.state !== 'review_required' &&
              status.state !== 'answered' &&
              records.length > 0
            ? `the business service made ${records.length} record(s), but the task ended ${status.state}`
            : null;
      if (wrong) {
        row.wrongOutcomes += 1;
        fail('trusted_outcome', wrong);
      }
      let over = false;
      for (const [dimension, used] of Object.entries(status.budget.used)) {
        const limit = (status.budget.limits as unknown as Record<string, number>)[dimension];
        if (limit !== undefined && used > limit) {
          over = true;
          fail('within_budget', `${dimension} used ${used}, limit ${limit}`);
        }
      }
      // Money counted from the service's own records, not from the library's counters.
      const moved = records.reduce((sum, record) => sum + (record.amount ?? 0), 0);
      if (moved > status.budget.limits.money) {
        over = true;
        fail(
          'within_budget',
          `the service's records move ${moved}, over the task's money limit ${status.budget.limits.money}`,
        );
      }
      if (over) counts.overruns += 1;
      if (canonicalScopes(status.principal.scopes) !== canonicalScopes(testCase.principal.scopes)) {
        fail(
          'injection_changes_nothing',
          `the task's principal has scopes ${status.principal.scopes.join(' ')}, not the session's`,
        );
      }
    }
    if (spec.fault === 'read_timeout' && spec.hangsEveryAttempt) {
      const read = script.proposals.find((p) => p.role === 'read');
      const observation = read && observationOf(read.callId);
      if (observation?.ok)
        fail(
          'unknown_read_is_unknown',
          `a read that never answered was reported as a result: ${JSON.stringify(observation.data).slice(0, 120)}`,
        );
    }
  }

  const metrics = runMetrics(runs, faulty, sideEffects, recordsByKey, lookedUp, counts);
  return { rows: [...rows.values()].filter((row) => row.tasks > 0), metrics, failures, ok: failures.length === 0 };
}
