/**
 * `npm run tasks -- <command>`: look into a task store and take over orphaned tasks.
 *
 *   list [--state s]     stored tasks, most recently updated first
 *   show <taskId>        status, pending confirmation, budgets, outcome
 *   audit <taskId>       the audit trail as a readable trace (or --json)
 *   recover              resume tasks whose process died, with the demo's tools over the Redis-backed demo
 *                        services and the scripted demo model; prints the RecoveryReport, then drives them
 *
 * `npm run tasks -- --help` lists the options.
 */
import { parseArgs } from 'node:util';
import { formatTrace } from '../audit/formatTrace.js';
import { demoModel, durableDemoTools } from '../demo/durableDemo.js';
import { RedisBookingService } from '../demo/redisBookingService.js';
import { type Orchestrator, type TaskStatus, createOrchestrator } from '../orchestrator.js';
import { TASK_STATES, type TaskState, type TaskSummary } from '../store/envelope.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Tool } from '../tool.js';
import { openStore } from './openStore.js';
import { UsageError, runCli } from './runCli.js';

const DEFAULT_PREFIX = 'statechart-agent-demo';

const HELP = `Usage: npm run tasks -- <command> [options]

Commands:
  list [--state <s>]   stored tasks, newest first; --state filters (${TASK_STATES.join(', ')})
  show <taskId>        status, pending confirmation, budgets and outcome of one task
  audit <taskId>       the task's audit trail as a trace (--json: the entries)
  recover              resume running tasks whose process died (their lease expired), with the demo tools
                       over the Redis-backed demo services (REDIS_URL, --prefix) and the scripted demo model;
                       prints the recovery report, then drives the resumed tasks until they settle

Options:
  --store <kind>       file (default) or redis (REDIS_URL)
  --data-dir <dir>     the file store's directory (default: .data/demo; the demo keeps one per scenario,
                       e.g. .data/demo/refund)
  --prefix <prefix>    Redis key prefix of the store and of the demo services (default: ${DEFAULT_PREFIX})
  --json               machine-readable output
  --verbose            audit: include budget checks and model requests
  --help               this text`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      store: { type: 'string', default: 'file' },
      'data-dir': { type: 'string', default: '.data/demo' },
      prefix: { type: 'string', default: DEFAULT_PREFIX },
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

  const store = await openStore(values.store!, { dataDir: values['data-dir']!, prefix: values.prefix });
  try {
    switch (command) {
      case 'list':
        return await list(store, values.state, values.json!);
      case 'show':
        return await withOrchestrator(store, [], async (o) => show(await o.status(taskId!), values.json!));
      case 'audit':
        return await withOrchestrator(store, [], async (o) => {
          const entries = await o.audit(taskId!);
          console.log(values.json ? JSON.stringify(entries, null, 2) : formatTrace(entries, { verbose: values.verbose! }));
          return 0;
        });
      case 'recover':
        return await recover(store, values.prefix!, values.json!);
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
  for (const key of Object.keys(budget.used) as (keyof typeof budget.used)[]) {
    lines.push(`  ${key.padEnd(10)}${String(budget.used[key]).padStart(10)} / ${String(budget.limits[key]).padEnd(10)} (${budget.remaining[key]})`);
  }
  lines.push(`  deadline  ${new Date(budget.deadlineAt).toISOString()}`);
  if (outcome) {
    lines.push(`outcome     ${outcome.status}: ${outcome.reason.code} (${outcome.reason.message})`);
    if (outcome.answer) lines.push(`answer      ${outcome.answer}`);
  } else {
    lines.push('outcome     (not finished)');
  }
  if (status.evidence.length > 0) lines.push(`evidence    ${status.evidence.map((e) => `${e.tool} ${JSON.stringify(e.fields)}`).join('; ')}`);
  console.log(lines.join('\n'));
  return 0;
}

async function recover(store: TaskStore, prefix: string, json: boolean): Promise<number> {
  const services = new RedisBookingService({ prefix });
  try {
    await services.seed();
    return await withOrchestrator(store, durableDemoTools(services), async (orchestrator) => {
      const report = await orchestrator.recover();
      if (!json) {
        console.log(`resumed ${report.resumed.length}: ${report.resumed.join(', ') || '-'}`);
        console.log(`busy ${report.busy.length}: ${report.busy.join(', ') || '-'}`);
        console.log(`quarantined ${report.quarantined.length}${report.quarantined.map((q) => `\n  ${q.taskId}: ${q.reason}`).join('')}`);
        console.log(`expired confirmations ${report.expired}`);
      }
      const settled: { taskId: string; state: string; code: string | null; error?: string }[] = [];
      for (const taskId of report.resumed) {
        try {
          const status = await orchestrator.settled(taskId);
          settled.push({ taskId, state: status.state, code: status.outcome?.reason.code ?? null });
        } catch (error) {
          settled.push({ taskId, state: 'stopped here', code: null, error: error instanceof Error ? error.message : String(error) });
        }
      }
      if (json) console.log(JSON.stringify({ report, settled }, null, 2));
      else for (const s of settled) console.log(`${s.taskId}: ${s.state}${s.code ? ` (${s.code})` : ''}${s.error ? ` — ${s.error}` : ''}`);
      return settled.some((s) => s.error) ? 1 : 0;
    });
  } finally {
    await services.close();
  }
}

/** An orchestrator over `store` for reading (no tools) or recovering; closed afterwards, the store left open. */
async function withOrchestrator(store: TaskStore, tools: Tool[], fn: (o: Orchestrator) => Promise<number>): Promise<number> {
  const orchestrator = createOrchestrator({ tools, model: demoModel(), store, expirySweepMs: 0 });
  try {
    return await fn(orchestrator);
  } finally {
    await orchestrator.close();
  }
}

function printColumns(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows) console.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd());
}

runCli(() => main(process.argv.slice(2)), HELP);
