/**
 * The LangGraph JS peer of `npm run bench:peers`: the bench's workload as a user of LangGraph would write it. A
 * StateGraph over MessagesAnnotation with a model node (a scripted fake model: one tool call per round for K
 * rounds, then an answer) and the prebuilt ToolNode running a no-op tool with a ~200 B result, checkpointed by
 * SqliteSaver with `durability: 'sync'` (each checkpoint is written before the next step starts).
 *
 * Run by scripts/bench/langgraphPeer.ts as a child process, so that these dependencies stay in this folder:
 *   node --import tsx bench/langgraph/peer.ts            line protocol: one JSON request per stdin line,
 *                                                        one "RESULT {json}" line per request on stdout
 *   node --import tsx bench/langgraph/peer.ts --k 200 --tasks 1     one cell, then exit
 * Requests: { op: 'cell', k, tasks, repeat } and { op: 'resume', k, samples } (ms to the first checkpoint of each
 * resume; the parked thread is built on the first request for a k). Errors go to stderr.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { z } from 'zod';

/** The tool result, about 200 B of JSON, as in the other systems of the bench. */
const RESULT_TEXT = 'x'.repeat(180);

const noop = tool(async ({ n }) => JSON.stringify({ n, text: RESULT_TEXT }), {
  name: 'noop',
  description: 'does nothing, at once',
  schema: z.object({ n: z.number().int() }),
});

/** Counts what the graph asks the saver to write: checkpoints (put) and pending writes (putWrites). */
class CountingSaver extends SqliteSaver {
  puts = 0;
  writes = 0;
  onPut: (() => void) | null = null;

  /** Creates the tables now, so that the empty file can be measured before the first thread. */
  override setup(): void {
    super.setup();
  }

  override async put(...args: Parameters<SqliteSaver['put']>) {
    const saved = await super.put(...args);
    this.puts += 1;
    this.onPut?.();
    return saved;
  }

  override async putWrites(...args: Parameters<SqliteSaver['putWrites']>) {
    await super.putWrites(...args);
    this.writes += 1;
  }
}

/**
 * The scripted model: the round is the number of AI messages so far (so a resumed thread continues the same
 * script). `crashAt` makes the call of that round throw, leaving the thread at rest in front of the model node.
 */
function buildGraph(saver: CountingSaver, k: number, crashAt: number | null) {
  const model = async (state: typeof MessagesAnnotation.State) => {
    const round = state.messages.filter((m) => m.getType() === 'ai').length + 1;
    if (round === crashAt) throw new Error(`scripted crash at round ${round}`);
    if (round > k) return { messages: [new AIMessage('done')] };
    return {
      messages: [
        new AIMessage({
          content: '',
          tool_calls: [{ id: `c${round}`, name: 'noop', args: { n: round }, type: 'tool_call' }],
        }),
      ],
    };
  };
  return new StateGraph(MessagesAnnotation)
    .addNode('model', model)
    .addNode('tools', new ToolNode([noop]))
    .addEdge(START, 'model')
    .addConditionalEdges('model', toolsCondition, ['tools', END])
    .addEdge('tools', 'model')
    .compile({ checkpointer: saver });
}

const invokeOptions = (threadId: string, k: number) => ({
  configurable: { thread_id: threadId },
  durability: 'sync' as const,
  recursionLimit: 2 * k + 10,
});

/** Where the SQLite files go: BENCH_SQLITE_DIR, else /dev/shm (memory, like a Redis without persistence), else tmp. */
function sqliteDir(): string {
  const base = process.env.BENCH_SQLITE_DIR ?? (isDir('/dev/shm') ? '/dev/shm' : tmpdir());
  return mkdtempSync(join(base, 'bench-langgraph-'));
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The database's size with its WAL folded in, in bytes. */
function fileBytes(saver: SqliteSaver, file: string): number {
  saver.db.pragma('wal_checkpoint(TRUNCATE)');
  return statSync(file).size;
}

/** CPU time of this process's main thread in µs (Linux schedstat), or null where the kernel does not expose it. */
function mainThreadCpuUs(): number | null {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  } catch {
    return null;
  }
}

interface CellRequest {
  op: 'cell';
  k: number;
  tasks: number;
  repeat: number;
}

interface ResumeRequest {
  op: 'resume';
  k: number;
  samples: number;
}

let cellNumber = 0;

/** `tasks` threads of `k` rounds at once, `repeat` times in a row, on a fresh database file. */
async function runCell({ k, tasks, repeat }: CellRequest) {
  const dir = sqliteDir();
  const file = join(dir, 'checkpoints.db');
  const saver = new CountingSaver(SqliteSaver.fromConnString(file).db);
  try {
    const graph = buildGraph(saver, k, null);
    saver.setup();
    const emptyBytes = fileBytes(saver, file);
    cellNumber += 1;
    const cpu = process.cpuUsage();
    const main = mainThreadCpuUs();
    const elu = performance.eventLoopUtilization();
    const start = performance.now();
    for (let r = 0; r < repeat; r++) {
      await Promise.all(
        Array.from({ length: tasks }, async (_, i) => {
          const threadId = `c${cellNumber}-r${r}-t${i}`;
          const out = await graph.invoke({ messages: [new HumanMessage(`rounds:${k}`)] }, invokeOptions(threadId, k));
          if (out.messages.length !== 2 * k + 2)
            throw new Error(`thread ${threadId} ended with ${out.messages.length} messages`);
        }),
      );
    }
    const wallMs = performance.now() - start;
    const used = process.cpuUsage(cpu);
    const mainAfter = mainThreadCpuUs();
    const active = performance.eventLoopUtilization(elu);
    const rounds = k * tasks * repeat;
    return {
      k,
      tasks,
      repeat,
      rounds,
      wallMs,
      roundsPerSecond: rounds / (wallMs / 1000),
      mainCpuUsPerRound: (main !== null && mainAfter !== null ? mainAfter - main : active.active * 1000) / rounds,
      mainCpuSource: main !== null ? 'schedstat' : 'event-loop',
      processCpuUsPerRound: (used.user + used.system) / rounds,
      checkpointsPerRound: saver.puts / rounds,
      writesPerRound: saver.writes / rounds,
      storedBytesPerRound: (fileBytes(saver, file) - emptyBytes) / rounds,
    };
  } finally {
    saver.db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Threads of k rounds left at rest in front of the model node, by k: built once, resumed from copies. */
const parkedThreads = new Map<number, { dir: string; file: string }>();

/** A thread of `k` rounds whose next model call crashed: the state a process that died there leaves behind. */
async function parkThread(k: number) {
  const dir = sqliteDir();
  const file = join(dir, 'checkpoints.db');
  const saver = new CountingSaver(SqliteSaver.fromConnString(file).db);
  try {
    await buildGraph(saver, k, k + 1)
      .invoke({ messages: [new HumanMessage(`rounds:${k}`)] }, invokeOptions('resume', k))
      .then(
        () => Promise.reject(new Error('the resume thread did not stop at its scripted crash')),
        (error: Error) => (error.message.startsWith('scripted crash') ? undefined : Promise.reject(error)),
      );
    saver.db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    saver.db.close();
  }
  const parked = { dir, file };
  parkedThreads.set(k, parked);
  for (let i = 0; i < 3; i++) await resumeOnce(k, parked.file, join(dir, 'warm-up.db')); // warms the restore path
  return parked;
}

/** A fresh saver and graph on a copy of the parked thread, `invoke(null)` to continue it: ms to its first checkpoint. */
async function resumeOnce(k: number, parkedFile: string, copy: string): Promise<number> {
  const source = SqliteSaver.fromConnString(parkedFile).db;
  await source.backup(copy);
  source.close();
  const start = performance.now();
  const saver = new CountingSaver(SqliteSaver.fromConnString(copy).db);
  const first = new Promise<number>((resolve) => (saver.onPut = () => resolve(performance.now())));
  const run = buildGraph(saver, k, null).invoke(null, invokeOptions('resume', k));
  const ms = (await first) - start;
  await run;
  saver.db.close();
  rmSync(copy, { force: true });
  rmSync(`${copy}-wal`, { force: true });
  rmSync(`${copy}-shm`, { force: true });
  return ms;
}

async function runResume({ k, samples }: ResumeRequest) {
  const parked = parkedThreads.get(k) ?? (await parkThread(k));
  const times: number[] = [];
  for (let i = 0; i < samples; i++) times.push(await resumeOnce(k, parked.file, join(parked.dir, `resume-${i}.db`)));
  return { k, times };
}

function removeParkedThreads(): void {
  for (const { dir } of parkedThreads.values()) rmSync(dir, { recursive: true, force: true });
  parkedThreads.clear();
}

function versions() {
  const version = (name: string) => {
    try {
      return (
        JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')) as {
          version: string;
        }
      ).version;
    } catch {
      return 'unknown';
    }
  };
  return {
    langgraph: version('@langchain/langgraph'),
    checkpointSqlite: version('@langchain/langgraph-checkpoint-sqlite'),
    core: version('@langchain/core'),
    betterSqlite3: version('better-sqlite3'),
    sqliteDir: process.env.BENCH_SQLITE_DIR ?? (isDir('/dev/shm') ? '/dev/shm' : tmpdir()),
  };
}

async function handle(request: CellRequest | ResumeRequest) {
  return request.op === 'resume' ? runResume(request) : runCell(request);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.length > 0) {
    const arg = (name: string, fallback: number) => {
      const at = argv.indexOf(`--${name}`);
      return at >= 0 ? Number(argv[at + 1]) : fallback;
    };
    const result = await handle({ op: 'cell', k: arg('k', 10), tasks: arg('tasks', 1), repeat: arg('repeat', 1) });
    process.stdout.write(`${JSON.stringify({ ...versions(), ...result })}\n`);
    return;
  }
  // Warm-up, so that the first measured cell does not pay for compiling the code paths.
  await runCell({ op: 'cell', k: 20, tasks: 2, repeat: 2 });
  process.stdout.write(`READY ${JSON.stringify(versions())}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      process.stdout.write(`RESULT ${JSON.stringify(await handle(JSON.parse(line) as CellRequest | ResumeRequest))}\n`);
    } catch (error) {
      process.stdout.write(
        `FAILED ${JSON.stringify({ message: error instanceof Error ? (error.stack ?? error.message) : String(error) })}\n`,
      );
    }
  }
  removeParkedThreads();
}

main().catch((error: unknown) => {
  removeParkedThreads();
  process.stderr.write(
    `langgraph peer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
