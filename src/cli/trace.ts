#!/usr/bin/env node
/**
 * `trace <taskId> [--out file.html]`: writes a task's trace page (the statechart with the states it
 * visited highlighted, and a timeline of gate decisions, tool calls, confirmations and the stop reason) as one
 * self-contained HTML file. `trace --help` lists the options.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { createOrchestrator } from '../orchestrator/orchestrator.js';
import { renderTraceHtml } from '../visualize/traceHtml.js';
import { READ_ONLY_HOST, loadHost } from './host.js';
import { openStore } from './openStore.js';
import { UsageError, runCli } from './runCli.js';
import { DEFAULT_DATA_DIR, DEFAULT_PREFIX, locateTask } from './taskLocation.js';

const HELP = `Usage: statechart-agent-trace <taskId> [options]

Writes the task's trace page: the statechart with visited states and taken transitions highlighted, the final
state emphasized, and a timeline of gate decisions, tool calls, confirmations and the stop reason.

Options:
  --host <module>    a host module; only its locate(taskId) is used, to find the task (a HostFactory: see
                     docs/stores.md in the package)
  --store <kind>     file (default) or redis (REDIS_URL)
  --data-dir <dir>   the file store's directory (default: ${DEFAULT_DATA_DIR}, or where the host module locates it)
  --prefix <prefix>  Redis key prefix (default: ${DEFAULT_PREFIX}, or where the host module locates it)
  --out <file>       where to write the page (default: .data/traces/<taskId>.html)
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
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const [taskId, ...extra] = positionals;
  if (!taskId) throw new UsageError('trace needs a task id');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  const host = values.host ? await loadHost(values.host) : READ_ONLY_HOST;
  const location = locateTask(
    taskId,
    { store: values.store, dataDir: values['data-dir'], prefix: values.prefix },
    host,
  );
  const store = await openStore(location.store, { dataDir: location.dataDir, prefix: location.prefix });
  const model = { name: 'none', decide: () => Promise.reject(new Error('trace takes no model turns')) };
  const orchestrator = createOrchestrator({ tools: [], model, store, expirySweepMs: 0 });
  try {
    const status = await orchestrator.status(taskId);
    const audit = await orchestrator.audit(taskId);
    const out = values.out ?? `.data/traces/${taskId.replace(/[^\w.-]/g, '_')}.html`;
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, renderTraceHtml({ status, audit }));
    console.log(`wrote ${out}: ${status.taskId} ${status.state} (${status.stateValue}), ${audit.length} audit entries`);
    return 0;
  } finally {
    await orchestrator.close();
    await store.close();
  }
}

runCli(() => main(process.argv.slice(2)), HELP);
