#!/usr/bin/env node
/**
 * `tasks <command>`: look into a task store and take over orphaned tasks, for any host.
 *
 *   list [--state s]     stored tasks, most recently updated first
 *   show <taskId>        status, pending confirmation, budgets, outcome
 *   audit <taskId>       the audit trail as a readable trace (or --json)
 *   recover              resume tasks whose process died, with the tools and model of the host module given by
 *                        --host; prints the RecoveryReport, then drives them until they settle
 *
 * `tasks --help` lists the options.
 */
import { parseArgs } from 'node:util';
import { formatTrace } from '../audit/formatTrace.js';
import { systemClock } from '../clock.js';
import { type Orchestrator, type TaskStatus, createOrchestrator } from '../orchestrator/orchestrator.js';
import { TASK_STATES, type TaskState, type TaskSummary } from '../store/summary.js';
import type { TaskStore } from '../store/taskStore.js';
import { type HostModule, type HostSetup, READ_ONLY_HOST, loadHost } from './host.js';
import { openStore } from './openStore.js';
import { UsageError, runCli } from './runCli.js';
import { DEFAULT_DATA_DIR, DEFAULT_PREFIX, locateTask } from './taskLocation.js';

const HELP = `Usage: statechart-agent-tasks <command> [options]

Commands:
  list [--state <s>]   stored tasks, newest first; --state filters (${TASK_STATES.join(', ')})
  show <taskId>        status, pending confirmation, budgets and outcome of one task
  audit <taskId>       the task's audit trail as a trace (--json: the entries)
  recover              resume running tasks whose process died (their lease expired), with the tools and the
                       model of the host module (--host); prints the recovery report, then drives the resumed
                       tasks until they settle

Options:
  --host <module>      the host module: default-exports ({ store, dataDir, prefix, clock }) => ({ tools, model })
                       (a HostFactory: docs/stores.md in the package); needed by recover
  --store <kind>       file (default) or redis (REDIS_URL)
  --data-dir <dir>     the file store's directory (default: ${DEFAULT_DATA_DIR}, or where the host module locates the task)
  --prefix <prefix>    Redis key prefix (default: ${DEFAULT_PREFIX}, or where the host module locates the task)
  --json               machine-readable output
  --verbose            audit: include budget checks and model requests
  --help               this text`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      host: { type: 'string' },
      store: { type: 'string', default: 'file' },
      'data-dir': { type: 'string' },
      prefix: { type: 'string' },
      state: { type: 'string' },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const [command, taskId, ...extra] = positionals;
  if (values.help || command === undefined) {
    console.log(HELP);
    return values.help ? 0 : 2;
  }
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  const needsTask = command === 'show' || command === 'audit';
  if (needsTask && !taskId) throw new UsageError(`${command} needs a task id`);
  if (!needsTask && taskId) throw new UsageError(`${command} takes no task id`);

  if (command === 'recover' && !values.host)
    throw new UsageError('recover needs --host <module>: the tools and model to continue tasks with');
  const host = values.host ? await loadHost(values.host) : READ_ONLY_HOST;
  const location = locateTask(
    taskId,
    { store: values.store, dataDir: values['data-dir'], prefix: values.prefix },
    host,
  );
  const store = await openStore(location.store, { dataDir: location.dataDir, prefix: location.prefix });
  try {
    switch (command) {
      case 'list':
        return await list(store, values.state, values.json!);
      case 'show':
        return await withOrchestrator(store, { tools: [] }, async (o) => show(await o.status(taskId!), values.json!));
      case 'audit':
        return await withOrchestrator(store, { tools: [] }, async (o) => {
          const entries = await o.audit(taskId!);
          console.log(
            values.json ? JSON.stringify(entries, null, 2) : formatTrace(entries, { verbose: values.verbose! }),
          );
          return 0;
        });
      case 'recover':
        return await recover(
          store,
          host,
          { store: location.store, dataDir: location.dataDir, prefix: location.prefix },
          values.json!,
        );
      default:
        throw new UsageError(`unknown command "${command}"; use list, show, audit or recover`);
    }
  } finally {
    await store.close();
  }
}

async function list(store: TaskStore, state: string | undefined, json: boolean): Promise<number> {
  if (state !== undefined && !(TASK_STATES as readonly string[]).includes(state)) {
    throw new UsageError(`unknown state "${state}"; use one of ${TASK_STATES.join(', ')}`);
  }
  const tasks = await store.list(state ? { states: [state as TaskState] } : {});
  if (json) {
    console.log(JSON.stringify(tasks, null, 2));
    return 0;
  }
  if (tasks.length === 0) {
    console.log(state ? `No tasks in state ${state}.` : 'No tasks.');
    return 0;
  }
  const rows = tasks.map((t: TaskSummary) => [
    t.taskId,
    t.state,
    t.stateValue,
    `r${t.revision}`,
    `${t.userId}@${t.tenantId}`,
    new Date(t.updatedAt).toISOString(),
    t.outcomeCode ?? '',
  ]);
  printColumns([['TASK', 'STATE', 'MACHINE STATE', 'REV', 'USER', 'UPDATED', 'OUTCOME'], ...rows]);
  return 0;
}

function show(status: TaskStatus, json: boolean): number {
  if (json) {
    console.log(JSON.stringify(status, null, 2));
    return 0;
  }
  const { budget, outcome, pendingConfirmation: pending } = status;
  const lines = [
    `task        ${status.taskId}`,
    `state       ${status.state} (${status.stateValue}), revision ${status.revision}, turn ${status.turn}`,
    `user        ${status.principal.userId}@${status.principal.tenantId}`,
    `goal        ${status.goal}`,
    `created     ${new Date(status.createdAt).toISOString()}, updated ${new Date(status.updatedAt).toISOString()}`,
  ];
  if (pending) {
    lines.push(
      `confirm     ${pending.summary}`,
      `            id ${pending.id}, by ${pending.userId}, args ${pending.argsHash}, expires ${new Date(pending.expiresAt).toISOString()}`,
    );
  }
  if (status.question) lines.push(`question    ${status.question}`);
  lines.push('budget      used / limit (remaining)');
  for (const key of Object.keys(budget.used) as (keyof typeof budget.used & string)[]) {
    lines.push(
      `  ${key.padEnd(10)}${String(budget.used[key]).padStart(10)} / ${String(budget.limits[key]).padEnd(10)} (${budget.remaining[key]})`,
    );
  }
  lines.push(`  deadline  ${new Date(budget.deadlineAt).toISOString()}`);
  if (outcome) {
    lines.push(`outcome     ${outcome.status}: ${outcome.reason.code} (${outcome.reason.message})`);
    if (outcome.answer) lines.push(`answer      ${outcome.answer}`);
  } else {
    lines.push('outcome     (not finished)');
  }
  if (status.evidence.length > 0)
    lines.push(`evidence    ${status.evidence.map((e) => `${e.tool} ${JSON.stringify(e.fields)}`).join('; ')}`);
  console.log(lines.join('\n'));
  return 0;
}

async function recover(
  store: TaskStore,
  host: HostModule,
  where: { store: string; dataDir: string; prefix: string },
  json: boolean,
): Promise<number> {
  const setup = await host.setup({ ...where, clock: systemClock });
  if (!setup.model) throw new UsageError('the host module gives no model: recover needs one to continue tasks');
  try {
    return await withOrchestrator(store, setup, async (orchestrator) => {
      const report = await orchestrator.recover();
      if (!json) {
        console.log(`resumed ${report.resumed.length}: ${report.resumed.join(', ') || '-'}`);
        console.log(`busy ${report.busy.length}: ${report.busy.join(', ') || '-'}`);
        console.log(
          `quarantined ${report.quarantined.length}${report.quarantined.map((q) => `\n  ${q.taskId}: ${q.reason}`).join('')}`,
        );
        console.log(
          `catalog mismatch ${report.catalogMismatch.length}${report.catalogMismatch.map((q) => `\n  ${q.taskId}: ${q.reason}`).join('')}`,
        );
        console.log(`expired confirmations ${report.expired}`);
      }
      const settled: { taskId: string; state: string; code: string | null; error?: string }[] = [];
      for (const taskId of report.resumed) {
        try {
          const status = await orchestrator.settled(taskId);
          settled.push({ taskId, state: status.state, code: status.outcome?.reason.code ?? null });
        } catch (error) {
          settled.push({
            taskId,
            state: 'stopped here',
            code: null,
            error: error instanceof Error ? error.message : String(error),
          });
        }
      }
      if (json) console.log(JSON.stringify({ report, settled }, null, 2));
      else
        for (const s of settled)
          console.log(`${s.taskId}: ${s.state}${s.code ? ` (${s.code})` : ''}${s.error ? ` — ${s.error}` : ''}`);
      return settled.some((s) => s.error) ? 1 : 0;
    });
  } finally {
    await setup.close?.();
  }
}

/** An orchestrator over `store` for reading (no tools) or recovering; closed afterwards, the store left open. */
async function withOrchestrator(
  store: TaskStore,
  setup: HostSetup,
  fn: (o: Orchestrator) => Promise<number>,
): Promise<number> {
  const model = setup.model ?? {
    name: 'none',
    decide: () => Promise.reject(new Error('this command takes no model turns')),
  };
  const orchestrator = createOrchestrator({ tools: setup.tools, model, store, expirySweepMs: 0 });
  try {
    return await fn(orchestrator);
  } finally {
    await orchestrator.close();
  }
}

function printColumns(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows)
    console.log(
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    );
}

runCli(() => main(process.argv.slice(2)), HELP);
