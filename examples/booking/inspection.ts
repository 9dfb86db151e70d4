/**
 * The inspection a CLI run asked for (`--inspect`, `--inspect-stream <file>`, `--inspect-ws <port>`), as one
 * `inspect` callback for the orchestrator and one `stop()`. Nothing starts unless a flag asks for it.
 */
import { createInterface } from 'node:readline/promises';
import type { InspectionEvent } from 'xstate';
import { AgentError } from '../../src/index.js';
import { type InspectionSink, createInspectionStream } from '../../src/inspect/index.js';
import { jsonLinesFileSink } from '../../src/inspect/index.js';
import {
  type StatelyInspection,
  type StatelyInspectionOptions,
  createStatelyInspection,
} from '../../src/inspect/index.js';
import { webSocketSink } from '../../src/inspect/index.js';

export interface InspectionRequest {
  /** The Stately inspector relay on this port (`--inspect`, `--inspect-port`). */
  stately?: {
    port: number;
    open: boolean;
    /** The service's session check: each page then sees only its session's tasks (without: the access key). */
    authenticate?: StatelyInspectionOptions['authenticate'];
    /** The operators' scope (the service's adminScope): they see every task of their tenant. */
    operatorScope?: string;
  };
  /** JSON lines of the offline stream to this file (`--inspect-stream`). */
  streamFile?: string;
  /** The offline stream on a local WebSocket on this port (`--inspect-ws`; 0 picks one). */
  wsPort?: number;
}

export interface CliInspection {
  inspect: (event: InspectionEvent) => void;
  /** What to tell the user: where to look, and what needs internet. */
  notes: string[];
  /** The Stately inspector's time travel (`showStep`), when it is on. */
  stately: Pick<StatelyInspection, 'showStep'> | null;
  /** True when the Stately inspector is on: a human may want time to open the page. */
  live: boolean;
  stop(): Promise<void>;
}

/** Parses a port flag: an integer 0-65535. */
export function parsePort(text: string, flag: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new AgentError('invalid_option', `${flag} needs a port number (0-65535), not "${text}"`);
  }
  return port;
}

/** Starts what `request` asks for; null when it asks for nothing. */
export async function startInspection(request: InspectionRequest): Promise<CliInspection | null> {
  const consumers: ((event: InspectionEvent) => void)[] = [];
  const stops: (() => Promise<void>)[] = [];
  const notes: string[] = [];
  let stately: StatelyInspection | null = null;
  const stop = async () => {
    // The reverse order of starting: the Stately client and relay, if any, stop last.
    for (const s of stops.reverse()) await s().catch(() => {});
  };
  try {
    if (request.stately) {
      stately = await createStatelyInspection({
        port: request.stately.port,
        open: request.stately.open,
        ...(request.stately.authenticate ? { authenticate: request.stately.authenticate } : {}),
        ...(request.stately.operatorScope ? { operatorScope: request.stately.operatorScope } : {}),
      });
      consumers.push(stately.inspect);
      stops.push(stately.stop);
      notes.push(
        `Stately inspector: open ${stately.url} in a browser. The page embeds the inspector UI from stately.ai, which needs`,
        '  internet; the local relay and its event stream do not (--inspect-stream / --inspect-ws work fully offline).',
      );
    }
    const sinks: InspectionSink[] = [];
    if (request.streamFile !== undefined) {
      const file = await jsonLinesFileSink(request.streamFile);
      sinks.push(file);
      notes.push(`Inspection stream: JSON lines to ${file.path} (one message per actor, event and snapshot).`);
    }
    if (request.wsPort !== undefined) {
      const ws = await webSocketSink({ port: request.wsPort });
      sinks.push(ws);
      notes.push(
        `Inspection stream: ${ws.url} (local WebSocket, one JSON message per frame; late clients get a backlog).`,
      );
    }
    if (sinks.length > 0) {
      consumers.push(
        createInspectionStream(
          { write: (message) => sinks.forEach((sink) => sink.write(message)) },
          { microsteps: true },
        ),
      );
      stops.push(async () => {
        await Promise.all(sinks.map((sink) => sink.close()));
      });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  if (consumers.length === 0) return null;
  return {
    inspect: (event) => {
      for (const consumer of consumers) consumer(event);
    },
    notes,
    stately,
    live: request.stately !== undefined,
    stop,
  };
}

/** Waits for Enter when stdin is a terminal (so a human can open the inspector page); returns at once otherwise. */
export async function pauseIfInteractive(prompt: string): Promise<void> {
  if (!process.stdin.isTTY) return;
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    await rl.question(prompt);
  } finally {
    rl.close();
  }
}
