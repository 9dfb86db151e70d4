/**
 * `npm run serve`: the demo as an HTTP service on the embedded file store, with the demo's tools and the scripted
 * model (no network, no keys). It starts two refund tasks for E17 when its store is empty, so both inboxes have
 * something to decide: O-1001 (999.00 refused by the mandate, 199.00 waiting for E17's confirmation) and O-1002
 * (600.00 refused by the mandate, 450.00 waiting for the approval of M1, the manager: four eyes).
 * `npm run serve -- --help` lists the options.
 */
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { parseArgs } from 'node:util';
import { FileStore } from '../../src/index.js';
import { parsePort, startInspection } from './inspection.js';
import {
  APPROVAL_REFUND_START_BODY,
  DEMO_USERS,
  REFUND_START_BODY,
  createDemoService,
  demoAuthenticate,
  demoStartRequest,
} from './service.js';

const HELP = `Usage: npm run serve -- [options]

  --port <n>          HTTP port (default 3000; 0 picks a free one)
  --host <address>    interface to listen on (default 127.0.0.1)
  --data-dir <dir>    the file store's directory (default .data/serve)
  --model <kind>      scripted (default) or openai: a real model through OPENAI_API_KEY, OPENAI_MODEL and
                      OPENAI_BASE_URL (any OpenAI-compatible server)
  --step              step the model: each model turn waits for "next" on the live task page
  --inspect           also stream every task to the Stately inspector relay (local; its UI needs internet)
  --inspect-port <n>  the relay's port (default 8080; 0 picks one)
  --empty             do not start the demo refund tasks when the store is empty
  --help              this text`;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '3000' },
    host: { type: 'string', default: '127.0.0.1' },
    'data-dir': { type: 'string', default: '.data/serve' },
    model: { type: 'string', default: 'scripted' },
    step: { type: 'boolean', default: false },
    inspect: { type: 'boolean', default: false },
    'inspect-port': { type: 'string', default: '8080' },
    empty: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
  strict: true,
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const port = parsePort(values.port, '--port');
if (values.model !== 'scripted' && values.model !== 'openai') {
  console.error(`--model must be scripted or openai, not "${values.model}"`);
  process.exit(2);
}
const missing = ['OPENAI_API_KEY', 'OPENAI_MODEL'].filter((name) => !process.env[name]);
if (values.model === 'openai' && missing.length > 0) {
  console.error(`--model openai needs ${missing.join(' and ')} (and OPENAI_BASE_URL for a local server)`);
  process.exit(2);
}
const model = values.model === 'openai' ? (await import('../../src/openai.js')).createOpenAIModel() : undefined;
const inspection = values.inspect
  ? await startInspection({
      stately: {
        port: parsePort(values['inspect-port'], '--inspect-port'),
        open: false,
        // The relay's page is for signed-in demo users, each seeing the tasks the service would show them (the
        // demo_user cookie reaches the relay: cookies are per host, not per port).
        authenticate: (request) => demoAuthenticate(request as Parameters<typeof demoAuthenticate>[0]),
        // O1 sees every acme task there, as on the service.
        operatorScope: 'tasks:operate',
      },
    })
  : null;
await mkdir(values['data-dir'], { recursive: true });
const store = new FileStore(values['data-dir']);
const service = await createDemoService({
  store,
  step: values.step,
  ...(model ? { model } : {}),
  ...(inspection ? { inspect: inspection.inspect } : {}),
  ...(inspection?.stately ? { inspector: inspection.stately } : {}),
});
const address = await service.app.listen({ port, host: values.host });
const origin = address.replace('[::1]', 'localhost');
// Where the socket is bound (0.0.0.0:3000 with --host 0.0.0.0), which `origin` (a URL to click here) does not say.
const bound = service.app.server.address() as AddressInfo;
const bind = bound.family === 'IPv6' ? `[${bound.address}]:${bound.port}` : `${bound.address}:${bound.port}`;

if (!values.empty && (await store.list({ limit: 1 })).length === 0) {
  const stamp = Date.now().toString(36);
  const refund = await service.orchestrator.start(
    demoStartRequest({ ...REFUND_START_BODY, taskId: `refund-${stamp}` }, DEMO_USERS.E17!),
  );
  const approval = await service.orchestrator.start(
    demoStartRequest({ ...APPROVAL_REFUND_START_BODY, taskId: `approval-${stamp}` }, DEMO_USERS.E17!),
  );
  console.log(
    `started ${refund.taskId} for E17 (refund of O-1001, E17 confirms) and ${approval.taskId} (refund of O-1002, M1 approves)${values.step ? ': press "next" on their live pages to let the model take each turn' : ''}`,
  );
}
console.log(
  `statechart-agent service on ${origin} (listening on ${bind}, file store ${values['data-dir']}, ${model ? `model ${model.name}` : 'scripted model'}${values.step ? ', stepped' : ''})`,
);
console.log(
  `  sign in:   ${origin}/login?user=E17   (also E99, M1 the approver, Z5@globex; curl: -H 'authorization: Bearer E17')`,
);
console.log(`  inbox:     ${origin}/inbox`);
console.log(`  API:       ${origin}/api/tasks · ${origin}/api/openapi.json`);
for (const note of inspection?.notes ?? []) console.log(`  ${note}`);
// The addresses others reach it at: this machine's non-loopback interfaces when bound to every interface.
const wildcard = values.host === '0.0.0.0' || values.host === '::';
const reachable = (
  wildcard
    ? Object.values(networkInterfaces()).flatMap((nets) =>
        (nets ?? []).filter((net) => !net.internal && (values.host === '::' || net.family === 'IPv4')),
      )
    : [{ address: values.host, family: values.host.includes(':') ? 'IPv6' : 'IPv4' }]
).map(({ address: ip, family }) => (family === 'IPv6' ? `http://[${ip}]:${bound.port}` : `http://${ip}:${bound.port}`));
if (!isLoopback(values.host)) {
  // The demo signs anyone in by name (a bearer token that is a user id): fine on a laptop, not on a network.
  console.warn(
    [
      '',
      `WARNING: listening on ${bind}${wildcard ? ' (every network interface)' : ''}, not only on this machine.`,
      ...(reachable.length > 0 ? [`Reachable from the network at ${reachable.join(', ')}.`] : []),
      'The demo has no real sign-in: anyone who can reach this port can act as any demo user (E17, M1...) by name,',
      'confirm their refunds and read their tasks. Run it off loopback only on a network you trust.',
      '',
    ].join('\n'),
  );
}

let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  await service.close();
  await store.close();
  await inspection?.stop();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
