/**
 * Live inspection in the Stately inspector, on request only: a local relay (`statelyRelay.ts`: a page that embeds
 * the Stately inspector UI, and a WebSocket that feeds it) and the frames of this process's task actors. The UI
 * itself loads from stately.ai (it needs internet); the relay and the frames are local and work offline.
 *
 * The relay is ours, not `@statelyai/inspect/server`'s: that one relays whatever any client sends to every other
 * client, from any Origin, with no sign-in. Here frames are published in-process (no client connects to publish,
 * so nothing reconnects forever), a page is served only to a signed-in caller (the host's `authenticate`, or the
 * holder of the printed access key), its WebSocket needs the relay's Origin and the page's one-time token, each
 * viewer gets only the tasks its session may see, and nothing a viewer sends goes anywhere.
 *
 * What it streams is the offline inspection stream's reduced context (turn, budgets used, pending confirmation,
 * batch, outcome), and for an event only its type and identifiers (never the goal, the principal's scopes, actor
 * inputs or tool output such as a customer's note). Each task is one actor in the inspector, named `task:<taskId>`
 * (its children `task:<taskId>/<invoke id>`), however often it is evicted while it waits and reloaded. `showStep`
 * sends the task as it was at step N of its journal to that same actor (time travel).
 */
import http from 'node:http';
import { once } from 'node:events';
import type { InspectionEvent } from 'xstate';
import type { ReplayedTask } from '../audit/replayAudit.js';
import { AgentError } from '../errors.js';
import { type TaskAccessFacts, statelyFrames } from './statelyFrames.js';
import { type RelayRequest, type StatelyRelay, startStatelyRelay } from './statelyRelay.js';
import { stepSnapshotFrame, taskActorFrame } from './stepFrames.js';
import type { Principal } from '../../machines/context.js';

export type { RelayRequest } from './statelyRelay.js';

export interface StatelyInspectionOptions {
  /** Port of the local relay (page and WebSocket). Default 8080; 0 picks a free one. */
  port?: number;
  /** Interface the relay listens on (default 127.0.0.1: this machine only). */
  host?: string;
  /** Open the page in the default browser (default false). */
  open?: boolean;
  /** The inspector UI the page embeds (default https://stately.ai/inspect). */
  inspectorUrl?: string;
  /**
   * Who asks for the page (a service passes its own session check); null refuses it. Each viewer then sees only
   * the tasks that session may see. Without it, the page needs the relay's access key (in `url`), and its holder
   * sees every task of this process.
   */
  authenticate?: (request: RelayRequest) => Principal | null | Promise<Principal | null>;
  /** Origins besides the relay's own whose pages may open its WebSocket (e.g. behind a proxy). */
  allowedOrigins?: readonly string[];
  /**
   * The operators' scope (pass the orchestrator's `adminScope`): a signed-in holder sees every task of its tenant,
   * as over HTTP. Default none: viewers see their own tasks and those they must approve.
   */
  operatorScope?: string;
  /** How long a page's one-time WebSocket token stays valid (default 60 s). */
  tokenTtlMs?: number;
}

export interface StepView {
  taskId: string;
  /** `replayAudit(audit, N)`. */
  replayed: ReplayedTask;
  /** Whose task it is and who waits on it now (e.g. `orchestrator.status(taskId)`): who may see the frame. */
  access: TaskAccessFacts;
}

export interface StatelyInspection {
  /** For `createOrchestrator({ inspect })`. Does nothing once stopped. */
  inspect: (event: InspectionEvent) => void;
  /** Shows the task at a step of its journal in the inspector (time travel). Does nothing once stopped. */
  showStep(view: StepView): void;
  /** The page to open in a browser (with the access key when there is no `authenticate`). */
  url: string;
  /** The relay's origin: `http://127.0.0.1:<port>`. Its WebSocket is at the same address (`ws://`). */
  origin: string;
  port: number;
  /** Releases the relay and every socket; the process can exit afterwards. Idempotent. */
  stop(): Promise<void>;
}

export class InspectorStartError extends AgentError<'inspector_start_failed'> {
  constructor(message: string) {
    super('inspector_start_failed', message);
  }
}

/**
 * Starts the relay. Resolves once it listens.
 *
 * @example
 * const inspection = await createStatelyInspection({ port: 8080 });
 * console.log(`open ${inspection.url}`);
 * const orchestrator = createOrchestrator({ tools, model, inspect: inspection.inspect });
 * // ...
 * await orchestrator.close();
 * await inspection.stop();
 */
export async function createStatelyInspection(options: StatelyInspectionOptions = {}): Promise<StatelyInspection> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port === 0 ? await freePort(host) : (options.port ?? 8080);
  let relay: StatelyRelay;
  try {
    relay = await startStatelyRelay({
      port,
      host,
      inspectorUrl: options.inspectorUrl ?? 'https://stately.ai/inspect',
      ...(options.authenticate ? { authenticate: options.authenticate } : {}),
      ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
      ...(options.operatorScope !== undefined ? { operatorScope: options.operatorScope } : {}),
      ...(options.tokenTtlMs !== undefined ? { tokenTtlMs: options.tokenTtlMs } : {}),
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (error instanceof AgentError) throw error;
    throw new InspectorStartError(
      code === 'EADDRINUSE'
        ? `port ${port} is in use; choose another with --inspect-port <port>`
        : `the inspector relay could not listen on port ${port}: ${(error as Error).message}`,
    );
  }
  if (options.open) openInBrowser(relay.url);
  let stopped = false;
  const frames = statelyFrames((frame, task) => relay.publish(frame, task.taskId, task.access));
  return {
    inspect: (event) => {
      if (!stopped) frames(event);
    },
    showStep({ taskId, replayed, access }) {
      if (stopped) return;
      if (!relay.knows(taskId)) relay.publish(taskActorFrame(taskId, Date.now()), taskId, access);
      relay.publish(stepSnapshotFrame(taskId, replayed, Date.now()), taskId, access);
    },
    url: relay.url,
    origin: relay.origins[0]!,
    port: relay.port,
    async stop() {
      if (stopped) return;
      stopped = true;
      await relay.stop();
    },
  };
}

function openInBrowser(url: string): void {
  const command = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  void import('node:child_process').then(({ spawn }) => {
    const child = spawn(command, [url], { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  });
}

async function freePort(host: string): Promise<number> {
  const probe = http.createServer();
  probe.listen(0, host);
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
