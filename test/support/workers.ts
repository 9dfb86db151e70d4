/**
 * Child processes for tests: spawns TypeScript entry points with `node --import tsx`, collects their stdout lines,
 * waits for marker lines (never for fixed sleeps), and kills every child it started, by pid, in `killAll()` —
 * call it from afterEach so a failing test leaves no process behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RecoveryReport } from '../../src/orchestrator/orchestrator.js';
import type { AckedSave, WorkerConfig, WorkerResult } from './crashProtocol.js';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CRASH_WORKER = fileURLToPath(new URL('./crashWorker.ts', import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One child process and what it printed. */
export class Child {
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<Exit>;
  private readonly watchers = new Set<() => void>();
  private exit: Exit | null = null;

  constructor(
    readonly name: string,
    readonly process: ChildProcess,
  ) {
    let partial = '';
    process.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      partial += chunk;
      const parts = partial.split('\n');
      partial = parts.pop()!;
      this.lines.push(...parts);
      this.notify();
    });
    process.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    // 'close', not 'exit': it comes after the last stdout chunk, so `lines` is complete once the process ended.
    this.exited = new Promise((resolve) =>
      process.once('close', (code, signal) => {
        this.exit = { code, signal };
        this.notify();
        resolve(this.exit);
      }),
    );
  }

  get pid(): number {
    return this.process.pid!;
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** Resolves with the first line starting with `prefix` (already printed or to come); rejects on exit or timeout. */
  waitFor(prefix: string, timeoutMs = 15_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const line = this.lines.find((l) => l.startsWith(prefix));
        if (line !== undefined) return done(() => resolve(line));
        if (this.exit) return done(() => reject(new Error(`${this.name} exited (${JSON.stringify(this.exit)}) before printing "${prefix}"${this.describe()}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`${this.name} did not print "${prefix}" within ${timeoutMs} ms${this.describe()}`))), timeoutMs);
      const done = (then: () => void) => {
        clearTimeout(timer);
        this.watchers.delete(check);
        then();
      };
      this.watchers.add(check);
      check();
    });
  }

  /** Waits for the process to end (rejects after `timeoutMs`). */
  async ended(timeoutMs = 15_000): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms${this.describe()}`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) process.kill(this.pid, signal);
  }

  /** SIGKILL, then wait until the process is gone. */
  async kill(): Promise<Exit> {
    this.signal('SIGKILL');
    return this.ended(5_000);
  }

  send(line: string): void {
    this.process.stdin!.write(`${line}\n`);
  }

  /** The JSON after `TAG ` on every line so tagged. */
  values<T>(tag: string): T[] {
    return this.lines.filter((l) => l.startsWith(`${tag} `)).map((l) => JSON.parse(l.slice(tag.length + 1)) as T);
  }

  private notify(): void {
    for (const watcher of [...this.watchers]) watcher();
  }

  private describe(): string {
    return `\n--- stdout\n${this.lines.join('\n')}\n--- stderr\n${this.stderr.slice(-4000)}`;
  }
}

/** A crash worker (test/support/crashWorker.ts) and its protocol lines. */
export class Worker extends Child {
  saved(): AckedSave[] {
    return this.values<AckedSave>('SAVED');
  }

  report(): RecoveryReport | undefined {
    return this.values<RecoveryReport>('REPORT')[0];
  }

  result(): WorkerResult | undefined {
    return this.values<WorkerResult>('RESULT')[0];
  }

  failure(): { name: string; code: string | null; message: string } | undefined {
    return this.values<{ name: string; code: string | null; message: string }>('FAILED')[0];
  }
}

/** Starts children and remembers them, so `killAll()` can leave none behind. */
export class ChildPool {
  private readonly children: Child[] = [];

  /** Runs a command-line script to its end (with `input` on stdin, then end of input): its exit code and output. */
  async run(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {}) {
    const child = this.spawnTs(file, file, args, options.env);
    if (options.input !== undefined) child.process.stdin!.end(options.input);
    const { code } = await child.ended(options.timeoutMs ?? 20_000);
    return { code, out: child.lines.join('\n'), err: child.stderr };
  }

  /** Runs a TypeScript file with node --import tsx, from the project root. */
  spawnTs(name: string, file: string, args: string[], env: NodeJS.ProcessEnv = {}): Child {
    const child = new Child(name, this.start(file, args, env));
    this.children.push(child);
    return child;
  }

  worker(name: string, config: WorkerConfig): Worker {
    const worker = new Worker(name, this.start(CRASH_WORKER, [JSON.stringify(config)], {}));
    this.children.push(worker);
    return worker;
  }

  /** SIGKILLs every child still running (stopped ones too) and waits for them to be gone. */
  async killAll(): Promise<void> {
    const running = this.children.filter((c) => c.running);
    this.children.length = 0;
    await Promise.all(running.map((c) => c.kill().catch(() => undefined)));
  }

  private start(file: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
    return spawn(process.execPath, ['--import', 'tsx', file, ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  }
}
