/**
 * Child processes for tests: spawns TypeScript entry points with `node --import tsx`, collects their stdout lines,
 * waits for marker lines (never for fixed sleeps), and kills every child it started, by pid, in `killAll()` —
 * call it from afterEach so a failing test leaves no process behind. A test that fails prints what each child it
 * started wrote to stdout and stderr; the timeouts given here are for a quiet machine and scale with TEST_TIME_SCALE.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { TestRunner, onTestFailed, onTestFinished } from 'vitest';
import type { RecoveryReport } from '../../src/orchestrator/orchestrator.js';
import type { AckedSave, WorkerConfig, WorkerResult } from './crashProtocol.js';
import { scaled } from './timeScale.js';

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
  /** Output after the last newline (a line still being written, or the last one without its newline). */
  private partial = '';

  constructor(
    readonly name: string,
    readonly process: ChildProcess,
  ) {
    process.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.partial += chunk;
      const parts = this.partial.split('\n');
      this.partial = parts.pop()!;
      this.lines.push(...parts);
      this.notify();
    });
    process.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    // A command that cannot start (not installed): said in the transcript, not thrown in the test runner.
    process.once('error', (error) => {
      this.stderr += `\n[could not run ${name}: ${error.message}]`;
    });
    // 'close', not 'exit': it comes after the last stdout chunk, so `lines` is complete once the process ended.
    this.exited = new Promise((resolve) =>
      process.once('close', (code, signal) => {
        this.exit = { code, signal };
        this.notify();
        resolve(this.exit);
      }),
    );
    printOnFailure(() => this.transcript());
  }

  get pid(): number {
    return this.process.pid!;
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** Resolves with the first line starting with `prefix` (already printed or to come); rejects on exit or timeout. */
  waitFor(prefix: string, quietTimeoutMs = 15_000): Promise<string> {
    const timeoutMs = scaled(quietTimeoutMs);
    return new Promise((resolve, reject) => {
      const check = () => {
        const line = this.lines.find((l) => l.startsWith(prefix));
        if (line !== undefined) return done(() => resolve(line));
        if (this.exit)
          return done(() =>
            reject(
              new Error(
                `${this.name} exited (${JSON.stringify(this.exit)}) before printing "${prefix}"\n${this.transcript()}`,
              ),
            ),
          );
      };
      const timer = setTimeout(
        () =>
          done(() =>
            reject(new Error(`${this.name} did not print "${prefix}" within ${timeoutMs} ms\n${this.transcript()}`)),
          ),
        timeoutMs,
      );
      const done = (then: () => void) => {
        clearTimeout(timer);
        this.watchers.delete(check);
        then();
      };
      this.watchers.add(check);
      check();
    });
  }

  /** Waits for the process to end (rejects after `quietTimeoutMs`, scaled). */
  async ended(quietTimeoutMs = 15_000): Promise<Exit> {
    const timeoutMs = scaled(quietTimeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms\n${this.transcript()}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Everything the process wrote to stdout so far. */
  get stdout(): string {
    return [...this.lines, this.partial].join('\n');
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

  /** What the process wrote (the end of each stream), and how it ended: for failure messages. */
  transcript(): string {
    const status = this.exit ? `exited ${JSON.stringify(this.exit)}` : 'still running';
    const tail = (text: string, keep: number) =>
      text.length > keep ? `[${text.length - keep} characters before]\n${text.slice(-keep)}` : text;
    return `--- ${this.name} (pid ${this.process.pid ?? '-'}, ${status}) stdout\n${tail(this.stdout.replace(/\n$/, ''), 8_000)}\n--- ${this.name} stderr\n${tail(this.stderr, 4_000)}\n--- end of ${this.name}`;
  }
}

/**
 * Prints `transcript()` to stderr if the running test fails (the output of a child it started, so the failure shows
 * what the child said). Outside a test (a beforeAll, a script such as the workers bench), nothing: the error thrown
 * there has to carry it.
 */
export function printOnFailure(transcript: () => string): void {
  if (!TestRunner.getCurrentTest()) return;
  onTestFailed(() => {
    console.error(transcript());
  });
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

export interface CommandOptions {
  /** The name in transcripts (the command by default). */
  name?: string;
  cwd?: string;
  /** Added to this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** Written to stdin, then end of input (nothing by default). */
  input?: string;
  /** On a quiet machine (scaled by TEST_TIME_SCALE); 20 s by default. */
  timeoutMs?: number;
}

export interface CommandResult extends Exit {
  out: string;
  err: string;
  /** Both outputs and the exit, for an assertion's message. */
  transcript: string;
}

/**
 * Runs a command to its end outside any pool: its child is SIGKILLed when the test that ran it ends (for a timeout
 * of the test itself), or when the command's own timeout passes.
 */
export async function runCommand(
  command: string,
  args: string[],
  options: CommandOptions = {},
): Promise<CommandResult> {
  const pool = new ChildPool();
  if (TestRunner.getCurrentTest()) onTestFinished(() => pool.killAll());
  try {
    return await pool.command(command, args, options);
  } finally {
    await pool.killAll();
  }
}

/** Starts children and remembers them, so `killAll()` can leave none behind. */
export class ChildPool {
  private readonly children: Child[] = [];

  /** Runs a command-line script to its end (with `input` on stdin, then end of input): its exit code and output. */
  async run(
    file: string,
    args: string[],
    options: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {},
  ) {
    const child = this.spawnTs(file, file, args, options.env);
    if (options.input !== undefined) child.process.stdin!.end(options.input);
    const { code } = await child.ended(options.timeoutMs ?? 20_000);
    return { code, out: child.lines.join('\n'), err: child.stderr, transcript: child.transcript() };
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

  /** Runs any command to its end, as `run` does; `cwd` is the project root unless given. */
  async command(command: string, args: string[], options: CommandOptions = {}): Promise<CommandResult> {
    const child = new Child(
      options.name ?? command,
      spawn(command, args, {
        cwd: options.cwd ?? PROJECT_ROOT,
        env: { ...process.env, ...options.env },
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
    );
    this.children.push(child);
    child.process.stdin!.on('error', () => {}).end(options.input ?? '');
    const { code, signal } = await child.ended(options.timeoutMs ?? 20_000);
    return { code, signal, out: child.stdout, err: child.stderr, transcript: child.transcript() };
  }

  private start(file: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
    return spawn(process.execPath, ['--import', 'tsx', file, ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  }
}
