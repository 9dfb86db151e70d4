/**
 * The LangGraph peer, seen from the bench: installs bench/langgraph's dependencies when they are missing (from its
 * own lock file; the library never depends on them), starts bench/langgraph/peer.ts in a child process and asks it
 * for cells and resume figures over its stdin/stdout line protocol.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BenchSetupError } from './benchSetupError.js';
import type { CellResult, CellRun } from './cell.js';
import type { Resumable } from './extras.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PEER_DIR = fileURLToPath(new URL('../../bench/langgraph/', import.meta.url));

export interface PeerVersions {
  langgraph: string;
  checkpointSqlite: string;
  core: string;
  betterSqlite3: string;
  sqliteDir: string;
}

/** `npm ci` in bench/langgraph unless its node_modules is there. Throws BenchSetupError when it fails. */
export function ensurePeerInstalled(progress: (text: string) => void): void {
  if (existsSync(`${PEER_DIR}node_modules/@langchain/langgraph-checkpoint-sqlite/package.json`)) return;
  progress(
    'installing the LangGraph peer (npm ci --prefix bench/langgraph; better-sqlite3 may compile, about a minute)',
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.status !== 0) {
    throw new BenchSetupError(
      `Could not install the LangGraph peer's dependencies: \`npm ci --prefix bench/langgraph\` ${result.error ? `failed (${result.error.message})` : `exited with ${result.status}`}. ` +
        'Is the npm registry reachable (and, for better-sqlite3, GitHub or a C++ toolchain)? Install them by hand, or run `npm run bench` without the peer.',
    );
  }
}

/** The peer process, answering one request at a time. */
export class LangGraphPeer {
  private constructor(
    private readonly child: ChildProcess,
    readonly versions: PeerVersions,
    private readonly lines: AsyncIterator<string>,
    /** The end of what the peer wrote to stderr, for error messages. */
    private readonly stderr: () => string,
  ) {}

  /** Starts the peer and waits for it to warm up (it runs a small cell first). */
  static async start(): Promise<LangGraphPeer> {
    const child = spawn(process.execPath, ['--import', 'tsx', `${PEER_DIR}peer.ts`], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const first = await lines.next();
    if (first.done || !first.value.startsWith('READY ')) {
      child.kill();
      throw new BenchSetupError(
        `The LangGraph peer did not start: ${first.done ? 'it exited' : first.value}\n${stderr}`,
      );
    }
    return new LangGraphPeer(
      child,
      JSON.parse(first.value.slice('READY '.length)) as PeerVersions,
      lines,
      () => stderr,
    );
  }

  async cell(run: CellRun): Promise<CellResult> {
    const r = await this.request<{
      rounds: number;
      wallMs: number;
      roundsPerSecond: number;
      mainCpuUsPerRound: number;
      processCpuUsPerRound: number;
      checkpointsPerRound: number;
      storedBytesPerRound: number;
    }>({ op: 'cell', ...run });
    return {
      system: 'langgraph',
      ...run,
      rounds: r.rounds,
      wallMs: r.wallMs,
      roundsPerSecond: r.roundsPerSecond,
      mainCpuUsPerRound: r.mainCpuUsPerRound,
      processCpuUsPerRound: r.processCpuUsPerRound,
      // Measured in its own process, not counted there.
      allocatedBytesPerRound: null,
      savesPerRound: r.checkpointsPerRound,
      storedBytesPerRound: r.storedBytesPerRound,
      redis: null,
    };
  }

  /** A thread of `k` rounds at rest (built on the first call): `count` resume times in ms. */
  resumable(k: number): Resumable {
    return {
      rounds: k,
      sample: async (count) => (await this.request<{ times: number[] }>({ op: 'resume', k, samples: count })).times,
      close: async () => {},
    };
  }

  /** Ends the peer's input; it exits when it has answered. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('close', resolve));
    this.child.stdin!.end();
    await exited;
  }

  private async request<T>(request: object): Promise<T> {
    this.child.stdin!.write(`${JSON.stringify(request)}\n`);
    const line = await this.lines.next();
    if (line.done) throw new Error(`the LangGraph peer exited\n${this.stderr()}`);
    if (line.value.startsWith('RESULT ')) return JSON.parse(line.value.slice('RESULT '.length)) as T;
    throw new Error(`the LangGraph peer failed: ${line.value}\n${this.stderr()}`);
  }
}
