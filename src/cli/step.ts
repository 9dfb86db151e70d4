#!/usr/bin/env node
/**
 * `step <taskId> --host <module>`: step through a stored task, one event at a time, for any host. Loads the task,
 * shows its state and the events allowed now, reads one command per line from stdin (a terminal or a pipe), sends
 * it through the orchestrator API (so it is persisted like any host event) and shows the new state. The host's
 * model is gated: each model turn waits for `next`; tools and gates run as usual. `at <N>` shows the task as it
 * was after its first N audit entries, replayed from the journal (and, with `--inspect`, sent to the Stately
 * inspector as the task's snapshot). `step --help` lists the options.
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { type ReplayedTask, replayAudit } from '../audit/replayAudit.js';
import { type Clock, shiftedClock, systemClock } from '../clock.js';
import { TaskNotFoundError } from '../errors.js';
import {
  type Orchestrator,
  type ReviewResolution,
  type TaskStatus,
  createOrchestrator,
} from '../orchestrator/orchestrator.js';
import { type StatelyInspection, createStatelyInspection } from '../inspect/statelyInspector.js';
import { type GatedModel, gatedModel } from '../testing/gatedModel.js';
import { type HostSetup, loadHost } from './host.js';
import { openStore } from './openStore.js';
import { UsageError, runCli } from './runCli.js';
import { sendStepDecision, stepPrincipal } from './stepDecision.js';
import { type StepCommand, allowedCommands, formatAllowed, formatReplay, formatStatus } from './stepView.js';
import { DEFAULT_DATA_DIR, DEFAULT_PREFIX, locateTask } from './taskLocation.js';

const HELP = `Usage: statechart-agent-step <taskId> --host <module> [options]

Steps through a stored task. Commands, one per line on stdin:
  next               let the model take its turn; the task then runs until it needs the model again, needs a
                     human, or ends
  confirm [<id> [<hash>]]
                     confirm the pending call (exactly the arguments shown), or the confirmation named
  reject [--id <id>] [reason]
                     reject the pending call (or the confirmation named); the model is told
  answer <text>      answer the model's question
  resolve happened <result json> | not_happened [note] | retry [note]
                     as a reviewer (--as, --scopes with the review scope): say what a held write did
  cancel [reason]    cancel the task
  at <N>             show the task as it was after its first N audit entries (replayed from the journal; with
                     --inspect, the inspector shows that step too)
  quit               stop here (also at the end of input); the task stays as persisted

Options:
  --host <module>    the host module: its tools and model continue the task (a HostFactory: see docs/stores.md
                     in the package)
  --store <kind>     file (default) or redis (REDIS_URL)
  --data-dir <dir>   the file store's directory (default: ${DEFAULT_DATA_DIR}, or where the host module locates it)
  --prefix <prefix>  Redis key prefix (default: ${DEFAULT_PREFIX}, or where the host module locates it)
  --at <N>           first show the task at step N
  --as <userId>      send user events as this user (default: the task's user)
  --scopes <a,b>     the scopes of the --as session (default: none), e.g. an approver's or a reviewer's
  --inspect          watch the task live in the Stately inspector while you step it: a local relay on 127.0.0.1
                     (the inspector UI loads from stately.ai and needs internet; needs ws)
  --inspect-port <n> the relay's port (default 8080; 0 picks a free one)
  --real-clock       use the system clock (default: the task's own time, resumed from its last save, so a
                     confirmation does not expire while you read)
  --help             this text`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      host: { type: 'string' },
      store: { type: 'string', default: 'file' },
      'data-dir': { type: 'string' },
      prefix: { type: 'string' },
      at: { type: 'string' },
      as: { type: 'string' },
      scopes: { type: 'string' },
      'real-clock': { type: 'boolean', default: false },
      inspect: { type: 'boolean', default: false },
      'inspect-port': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const [taskId, ...extra] = positionals;
  if (!taskId) throw new UsageError('step needs a task id');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  if (!values.host) throw new UsageError('step needs --host <module>: the tools and model that continue the task');
  if (values.store !== 'file' && values.store !== 'redis')
    throw new UsageError(`--store must be file or redis, not "${values.store}"`);
  const startAt = values.at === undefined ? undefined : parseStep(values.at);
  if (values['inspect-port'] !== undefined && !values.inspect) throw new UsageError('--inspect-port needs --inspect');
  const inspectPort = values['inspect-port'] === undefined ? 8080 : parsePort(values['inspect-port']);

  const host = await loadHost(values.host);
  const location = locateTask(
    taskId,
    { store: values.store, dataDir: values['data-dir'], prefix: values.prefix },
    host,
  );
  const store = await openStore(location.store, { dataDir: location.dataDir, prefix: location.prefix });
  let setup: HostSetup | null = null;
  let inspection: StatelyInspection | null = null;
  try {
    const stored = await store.load(taskId);
    if (!stored) throw new TaskNotFoundError(taskId);
    const clock: Clock = values['real-clock'] ? systemClock : shiftedClock(stored.updatedAt);
    setup = await host.setup({ store: location.store, dataDir: location.dataDir, prefix: location.prefix, clock });
    if (!setup.model) throw new UsageError('the host module gives no model: step needs one to take the next turns');
    const model = gatedModel(setup.model);
    if (values.inspect) {
      inspection = await createStatelyInspection({ port: inspectPort });
      console.log(
        `Stately inspector: open ${inspection.url} (the task is one actor there, task:${taskId}; the UI loads from stately.ai)`,
      );
    }
    const orchestrator = createOrchestrator({
      tools: setup.tools,
      model,
      store,
      clock,
      expirySweepMs: 0,
      // A stepped turn waits for a human: no model timeout worth the name.
      modelTimeoutMs: 24 * 3_600_000,
      ...(inspection ? { inspect: inspection.inspect } : {}),
    });
    console.log(
      `step ${taskId} · ${location.description} · model ${setup.model.name} (gated: each model turn waits for \`next\`)`,
    );
    if (setup.where) console.log(`business data ${setup.where}`);
    try {
      const scopes =
        values.scopes === undefined
          ? []
          : values.scopes
              .split(',')
              .map((scope) => scope.trim())
              .filter(Boolean);
      const session = new StepSession(orchestrator, model, setup, taskId, clock, values.as, scopes, inspection);
      return await session.run(startAt);
    } finally {
      await orchestrator.close();
    }
  } finally {
    await setup?.close?.();
    await store.close();
    await inspection?.stop();
  }
}

class StepSession {
  constructor(
    private readonly orchestrator: Orchestrator,
    private readonly model: GatedModel,
    private readonly host: HostSetup,
    private readonly taskId: string,
    private readonly clock: Clock,
    private readonly as: string | undefined,
    private readonly scopes: string[],
    private readonly inspection: StatelyInspection | null,
  ) {}

  async run(startAt: number | undefined): Promise<number> {
    let status = await this.orchestrator.status(this.taskId);
    if (status.state === 'running') {
      console.log(`the task was left running (${status.stateValue}): resuming it here`);
      await this.orchestrator.resume(this.taskId);
      status = await this.quiet();
    }
    if (startAt !== undefined) await this.showAt(startAt);
    await this.show(status);

    const interactive = process.stdin.isTTY === true;
    const rl = createInterface({
      input: process.stdin,
      output: interactive ? process.stdout : undefined,
      terminal: interactive,
    });
    rl.setPrompt('step> ');
    if (interactive) rl.prompt();
    try {
      for await (const raw of rl) {
        const line = raw.trim();
        if (line === '') {
          if (interactive) rl.prompt();
          continue;
        }
        if (!interactive) console.log(`\n> ${line}`);
        const done = await this.handle(line).catch((error: unknown) => {
          console.log(`error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
          return false;
        });
        if (done) break;
        if (interactive) rl.prompt();
      }
    } finally {
      rl.close();
    }
    const final = await this.orchestrator.status(this.taskId);
    console.log(`\nbye: ${this.taskId} stays ${final.state} (${final.stateValue}), revision ${final.revision}`);
    return 0;
  }

  /** Handles one command line; true to stop. */
  private async handle(line: string): Promise<boolean> {
    const [word = '', ...rest] = line.split(/\s+/);
    const text = line.slice(word.length).trim();
    const command = word.toLowerCase() as StepCommand;
    if (command === 'quit' || (command as string) === 'exit') return true;
    if (command === 'at') {
      if (rest.length !== 1) throw new UsageError('at needs one step number: at <N>');
      await this.showAt(parseStep(rest[0]!));
      return false;
    }
    const status = await this.orchestrator.status(this.taskId);
    const allowed = allowedCommands(status, this.model.waiting !== null);
    if (!(['next', 'confirm', 'reject', 'answer', 'resolve', 'cancel'] as string[]).includes(command)) {
      console.log(`unknown command "${word}"; allowed now: ${formatAllowed(allowed)}`);
      return false;
    }
    // A decision that names its confirmation goes to the chart whatever the state: it answers why not.
    const named = (command === 'confirm' && text !== '') || (command === 'reject' && /^--id\s/.test(text));
    if (!allowed.includes(command) && !named) {
      console.log(
        `${command} is not allowed now (${status.state}, ${status.stateValue}); allowed: ${formatAllowed(allowed)}`,
      );
      return false;
    }
    const principal = stepPrincipal(status, this.as, this.scopes);
    let outcome: string;
    switch (command) {
      case 'next':
        this.model.release();
        outcome = `model turn ${status.turn} released`;
        break;
      case 'confirm':
      case 'reject': {
        const result = await sendStepDecision(this.orchestrator, status, principal, command, text);
        outcome = `${result.accepted ? 'accepted' : `refused (${result.code})`}: ${result.message}`;
        break;
      }
      case 'answer': {
        if (!text) throw new UsageError('answer needs the text: answer <text>');
        const result = await this.orchestrator.answer(this.taskId, principal, text);
        outcome = `${result.accepted ? 'accepted' : `refused (${result.code})`}: ${result.message}`;
        break;
      }
      case 'resolve': {
        const result = await this.orchestrator.resolveReview(this.taskId, principal, parseResolution(text));
        outcome = `${result.accepted ? 'accepted' : `refused (${result.code})`}: ${result.message}`;
        break;
      }
      case 'cancel': {
        const result = await this.orchestrator.cancel(this.taskId, principal, text);
        outcome = `${result.accepted ? 'accepted' : `refused (${result.code})`}: ${result.message}`;
        break;
      }
      default:
        return false;
    }
    console.log(`${command} → ${outcome}`);
    await this.show(await this.quiet());
    return false;
  }

  /** Waits until the task needs the model (gated), needs a human, or has ended; every step so far persisted. */
  private async quiet(): Promise<TaskStatus> {
    await Promise.race([this.orchestrator.settled(this.taskId), this.model.whenWaiting()]);
    return this.orchestrator.status(this.taskId);
  }

  private async show(status: TaskStatus): Promise<void> {
    const audit = await this.orchestrator.audit(this.taskId);
    const waiting = this.model.waiting !== null && !status.outcome;
    console.log(formatStatus(status, { auditLength: audit.length, modelWaiting: waiting, now: this.clock.now() }));
    if (this.host.rows) {
      const rows = await this.host.rows();
      console.log(`rows      ${rows.length === 0 ? '(none written)' : rows.join('; ')}`);
    }
    console.log(`events    ${formatAllowed(allowedCommands(status, waiting))}`);
  }

  private async showAt(n: number): Promise<ReplayedTask> {
    const audit = await this.orchestrator.audit(this.taskId);
    const status = await this.orchestrator.status(this.taskId);
    // A journal written before transitions were recorded: its last step is the state the task is in now.
    const replayed = replayAudit(audit, n, status.stateValue);
    if (n > audit.length) console.log(`(the journal has ${audit.length} entries; showing the last step)`);
    console.log(formatReplay(replayed, audit));
    if (this.inspection) {
      // Time travel in the inspector too: the task's actor shows the state of step N.
      this.inspection.showStep({ taskId: this.taskId, replayed, access: status });
      console.log(`inspector  task:${this.taskId} shows step ${replayed.step}`);
    }
    return replayed;
  }
}

/** `happened <json>`, `not_happened [note]`, `retry [note]`. */
function parseResolution(text: string): ReviewResolution {
  const [kind = '', ...rest] = text.split(/\s+/);
  const tail = text.slice(kind.length).trim();
  if (kind === 'happened') {
    let result: unknown;
    try {
      result = JSON.parse(tail);
    } catch {
      throw new UsageError(
        'resolve happened needs the result the reviewer found, as JSON: resolve happened {"booking_id":"B204",...}',
      );
    }
    return { resolution: 'happened', result };
  }
  if (kind === 'not_happened' || kind === 'retry') return { resolution: kind, ...(rest.length ? { note: tail } : {}) };
  throw new UsageError('resolve needs happened <result json>, not_happened [note] or retry [note]');
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new UsageError(`--inspect-port needs a port number (0-65535), not "${text}"`);
  return port;
}

function parseStep(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(`a step is a whole number of audit entries (0 or more), not "${text}"`);
  return n;
}

runCli(() => main(process.argv.slice(2)), HELP);
