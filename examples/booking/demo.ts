/**
 * `npm start`: the meeting-room booking (and a refund) from the design sources, on an embedded store with the
 * scripted model: no network, no keys. `npm start -- --help` lists the options.
 */
import { parseArgs, stripVTControlCharacters } from 'node:util';
import { type Json, displayText, formatTrace } from '../../src/index.js';
import { shiftedClock } from '../../src/testing/index.js';
import { DEMO_NOW, LEAKED_PANEL_KEY } from './bookingService.js';
import { DEMO_DATA_DIR, DemoDataError, demoPrefix, openScenarioStore } from './demoStores.js';
import {
  EXPECTED,
  SCENARIO_NAMES,
  type ScenarioEnv,
  type ScenarioName,
  type ScenarioResult,
  rowsOf,
  scenarios,
} from './scenarios.js';
import { createOpenAIModel } from '../../src/openai.js';
import type { TaskStore } from '../../src/index.js';
import { type CliInspection, parsePort, pauseIfInteractive, startInspection } from './inspection.js';
import { runCli } from '../../src/cli/runCli.js';

const HELP = `Usage: npm start -- [options]

  --scenario <name>   run one scenario: ${SCENARIO_NAMES.join(', ')} (default: all)
  --store <kind>      file (default, under --data-dir), memory, or redis (REDIS_URL)
  --data-dir <dir>    where the file store keeps tasks, one folder per scenario (default: .data/demo); the demo
                      only ever empties folders it made itself
  --prefix <prefix>   Redis key prefix, one per scenario under it (default: statechart-agent-demo:<your user name>);
                      the demo only ever deletes keys under a prefix it made itself
  --model <kind>      scripted (default) or openai: a real model through OPENAI_API_KEY, OPENAI_MODEL and
                      OPENAI_BASE_URL (any OpenAI-compatible server); its outcomes are shown, not checked
  --verbose           show every gate pass, budget check and model request
  --leave-waiting     leave the refund task waiting for its first confirmation (to step through it with
                      npm run step -- refund-1)
  --inspect           live view in the Stately inspector: serves a local relay page (it loads the inspector UI
                      from stately.ai, so it needs internet; the relay and its event stream do not)
  --inspect-port <n>  port of that page (default 8080; 0 picks a free one)
  --inspect-stream <file.jsonl>
                      the offline inspection stream as JSON lines (actor, event and snapshot messages)
  --inspect-ws <port> the offline inspection stream on ws://127.0.0.1:<port> (0 picks a free port)
  --no-color          plain output
  --help              this text`;

const color = process.stdout.isTTY && !process.env.NO_COLOR;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string' },
      store: { type: 'string', default: 'file' },
      'data-dir': { type: 'string', default: DEMO_DATA_DIR },
      prefix: { type: 'string' },
      model: { type: 'string', default: 'scripted' },
      verbose: { type: 'boolean', default: false },
      'leave-waiting': { type: 'boolean', default: false },
      inspect: { type: 'boolean', default: false },
      'inspect-port': { type: 'string', default: '8080' },
      'inspect-stream': { type: 'string' },
      'inspect-ws': { type: 'string' },
      'no-color': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const useColor = color && !values['no-color'];
  const names = values.scenario ? [values.scenario] : [...SCENARIO_NAMES];
  for (const name of names) {
    if (!(SCENARIO_NAMES as readonly string[]).includes(name)) {
      console.error(`Unknown scenario "${name}". Choose one of: ${SCENARIO_NAMES.join(', ')}.`);
      return 2;
    }
  }

  if (values.model !== 'scripted' && values.model !== 'openai') {
    console.error(`Unknown model "${values.model}". Choose scripted or openai.`);
    return 2;
  }
  const realModel = values.model === 'openai';
  if (realModel) {
    const missing = ['OPENAI_API_KEY', 'OPENAI_MODEL'].filter((name) => !process.env[name]?.trim());
    if (missing.length) {
      console.error(
        [
          `--model openai needs ${missing.join(' and ')}, which ${missing.length > 1 ? 'are' : 'is'} not set.`,
          '  OpenAI:        OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini npm start -- --model openai',
          '  Local server:  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=qwen2.5:7b OPENAI_API_KEY=local npm start -- --model openai',
          "                 (OPENAI_BASE_URL is the server's /v1 URL: Ollama :11434, vLLM :8000, llama.cpp :8080, LM Studio :1234;",
          '                 a server that ignores keys still needs a non-empty OPENAI_API_KEY)',
        ].join('\n'),
      );
      return 2;
    }
    console.log(
      `Real model ${process.env.OPENAI_MODEL} at ${process.env.OPENAI_BASE_URL?.trim() || 'the OpenAI API'}: outcomes are printed; differences from the scripted expectations do not fail the run.`,
    );
  }

  const dataDir = values['data-dir']!;
  const prefix = values.prefix ?? demoPrefix();
  const inspection = await startInspection({
    ...(values.inspect ? { stately: { port: parsePort(values['inspect-port']!, '--inspect-port'), open: false } } : {}),
    ...(values['inspect-stream'] !== undefined ? { streamFile: values['inspect-stream'] } : {}),
    ...(values['inspect-ws'] !== undefined ? { wsPort: parsePort(values['inspect-ws'], '--inspect-ws') } : {}),
  });
  const results: { result: ScenarioResult; problems: string[] }[] = [];
  try {
    await announce(inspection);
    for (const [index, name] of (names as ScenarioName[]).entries()) {
      const store: TaskStore = await openScenarioStore(values.store!, { dataDir, prefix, scenario: name });
      try {
        const env: ScenarioEnv = {
          store,
          clock: shiftedClock(DEMO_NOW),
          ...(realModel ? { model: () => createOpenAIModel() } : {}),
          ...(inspection ? { inspect: inspection.inspect } : {}),
          leaveWaiting: values['leave-waiting'],
        };
        const result = await scenarios[name](env);
        const waiting = values['leave-waiting'] && result.status.state === 'waiting_for_confirmation';
        const problems = waiting ? [] : check(result);
        results.push({ result, problems });
        print(index + 1, result, problems, useColor, values.verbose!, store.kind);
        if (waiting) printStepHint(result, values.store!, `${dataDir}/${name}`, `${prefix}:${name}`);
      } finally {
        await store.close();
      }
    }
    printSummary(results, useColor);
    if (inspection?.live)
      await pauseIfInteractive('\nThe inspector is still serving. Press Enter to stop it and exit. ');
  } finally {
    await inspection?.stop();
  }
  if (realModel) {
    console.log(
      `\n${paint(useColor, '2', 'Real model: ✗ marks differences from the scripted expectations; they do not fail the run.')}`,
    );
    return 0;
  }
  return results.every((r) => r.problems.length === 0) ? 0 : 1;
}

async function announce(inspection: CliInspection | null): Promise<void> {
  if (!inspection) return;
  for (const note of inspection.notes) console.log(note);
  if (inspection.live) await pauseIfInteractive('Open the page now, then press Enter to run the demo. ');
}

function printStepHint(result: ScenarioResult, store: string, dir: string, prefix: string): void {
  const where =
    store === 'file'
      ? dir === `${DEMO_DATA_DIR}/${result.name}`
        ? ''
        : ` --data-dir ${dir}`
      : store === 'redis'
        ? ` --store redis --prefix ${prefix}`
        : '';
  if (store === 'memory')
    console.log('   left waiting in the memory store: it is gone when this process exits (use --store file)');
  else console.log(`   left waiting; step through it: npm run step -- ${result.status.taskId}${where}`);
}

function check(result: ScenarioResult): string[] {
  const expected = EXPECTED[result.name];
  const problems: string[] = [];
  if (result.status.state !== expected.state) problems.push(`state ${result.status.state}, expected ${expected.state}`);
  const code = result.status.outcome?.reason.code ?? '';
  if (code !== expected.code) problems.push(`reason ${code}, expected ${expected.code}`);
  const rows = rowsOf(result);
  if (rows.join('|') !== expected.rows.join('|'))
    problems.push(`rows [${rows.join(', ')}], expected [${expected.rows.join(', ')}]`);
  if (JSON.stringify([result.audit, result.transcript ?? [], result.status]).includes(LEAKED_PANEL_KEY))
    problems.push("the key in R7's note reached the task's records");
  return problems;
}

/** Each text of a tool's result the model was shown that holds a sealed value, as people see it (`‹api-key›`). */
function sealedLines(result: ScenarioResult): { turn: number; text: string }[] {
  const lines: { turn: number; text: string }[] = [];
  const visit = (value: Json, path: string, turn: number, tool: string) => {
    if (typeof value === 'string' && value.includes('[[sealed:'))
      lines.push({ turn, text: `${tool} ${path}: ${JSON.stringify(displayText(value))}` });
    else if (Array.isArray(value)) value.forEach((item, i) => visit(item, `${path}[${i}]`, turn, tool));
    else if (value !== null && typeof value === 'object')
      for (const [key, item] of Object.entries(value)) visit(item, path ? `${path}.${key}` : key, turn, tool);
  };
  for (const entry of result.transcript ?? []) {
    if (entry.kind === 'result' && entry.observation.ok)
      visit(entry.observation.data, '', entry.turn, entry.observation.tool);
  }
  return lines;
}

const paint = (on: boolean, code: string, text: string) => (on ? `\x1b[${code}m${text}\x1b[0m` : text);

function print(
  n: number,
  result: ScenarioResult,
  problems: string[],
  useColor: boolean,
  verbose: boolean,
  store: string,
) {
  const bold = (t: string) => paint(useColor, '1', t);
  const dim = (t: string) => paint(useColor, '2', t);
  const title = `${n}. ${result.title}`;
  console.log(`\n${bold(title)} ${dim(`(--scenario ${result.name}, ${store} store)`)}`);
  console.log(dim(`   ${result.expectation}`));
  const trace = formatTrace(result.audit, { color: useColor, verbose, indent: '   ' }).split('\n');
  // Each sealed value after the last line of the turn whose result held it.
  for (const { turn, text } of sealedLines(result)) {
    const after = trace.findLastIndex((l) => stripVTControlCharacters(l).startsWith(`   t${turn} `));
    trace.splice(after + 1, 0, `   ${dim(`t${turn}`.padEnd(4))}${bold('sealed'.padEnd(9))}${text}`);
  }
  console.log(trace.join('\n'));
  for (const step of result.steps) console.log(`   ${paint(useColor, '35', 'human')}    ${step}`);
  const outcome = result.status.outcome;
  if (outcome?.answer) console.log(`   ${bold('answer')}   ${JSON.stringify(outcome.answer)}`);
  printRows(result, useColor);
  if (problems.length) console.log(paint(useColor, '31', `   ✗ unexpected: ${problems.join('; ')}`));
}

function printRows(result: ScenarioResult, useColor: boolean) {
  const dim = (t: string) => paint(useColor, '2', t);
  if (result.refunds.length || result.name === 'refund') {
    console.log(`   ${dim(`refunds: ${result.refunds.length} row${result.refunds.length === 1 ? '' : 's'}`)}`);
    for (const r of result.refunds) {
      console.log(
        `     ${r.refundId}  ${r.orderId}  ${(r.amountCents / 100).toFixed(2)}  by ${r.requestedBy}  ${dim(`key ${r.idempotencyKey.slice(0, 17)}…`)}`,
      );
    }
    return;
  }
  console.log(
    `   ${dim(`bookings: ${result.bookings.length} row${result.bookings.length === 1 ? '' : 's'}, ${result.reserveRequests} reservation request${result.reserveRequests === 1 ? '' : 's'} sent`)}`,
  );
  for (const b of result.bookings) {
    const key = b.idempotencyKey ? dim(`key ${b.idempotencyKey.slice(0, 17)}…`) : dim('(another employee)');
    console.log(
      `     ${b.bookingId}  ${b.roomId}  ${b.startAt.slice(0, 10)} ${b.startAt.slice(11, 16)}-${b.endAt.slice(11, 16)} ${b.startAt.slice(19)}  ${b.attendees} people  by ${b.requesterId}${b.cancelledAt ? '  cancelled' : ''}  ${key}`,
    );
  }
}

function printSummary(results: { result: ScenarioResult; problems: string[] }[], useColor: boolean) {
  if (results.length < 2) return;
  console.log(`\n${paint(useColor, '1', 'Summary')}`);
  console.log(paint(useColor, '2', `   ${'scenario'.padEnd(15)}${'outcome'.padEnd(35)}rows`));
  for (const { result, problems } of results) {
    const outcome = `${result.status.state} · ${result.status.outcome?.reason.code ?? '-'}`;
    const mark = problems.length ? paint(useColor, '31', '✗') : paint(useColor, '32', '✓');
    console.log(`   ${result.name.padEnd(15)}${outcome.padEnd(35)}${String(rowsOf(result).length).padEnd(6)}${mark}`);
  }
}

runCli(
  () =>
    main().catch((error: unknown) => {
      if (!(error instanceof DemoDataError)) throw error;
      console.error(error.message);
      return 2;
    }),
  HELP,
);
