/**
 * The host's tools wrapped for the acceptance run: faults are injected around them (a read that hangs, a write whose
 * response is lost after it committed, a write that hangs without effect, text injected into a read's output), never
 * inside the library, and every execution and lookup that reaches a tool is logged with the task and call it serves.
 */
import type { Json } from '../../machines/context.js';
import { canonicalJson } from '../../machines/lib/canonicalJson.js';
import type { LookupContext, ReadTool, Tool, ToolContext, ToolResult, WriteContext, WriteTool } from '../tool.js';

/** The faults one task's tool calls meet. */
export interface TaskFaults {
  /** Reads: the first attempt hangs, or every attempt. */
  readHang: 'none' | 'first' | 'all';
  /**
   * The first send of each write: commits then never answers; never answers and does nothing; or is delivered twice
   * with the same key (at-least-once delivery), the second answer returned.
   */
  writeFault: 'none' | 'lost_response' | 'timeout_no_effect' | 'redelivered';
  /** Text put into the string fields of every read's output. */
  inject: string | null;
}

const NO_FAULTS: TaskFaults = { readHang: 'none', writeFault: 'none', inject: null };

export interface Execution {
  taskId: string;
  callId: string;
  tool: string;
  effect: 'read' | 'write';
  /** The arguments as the tool received them, in canonical JSON. */
  args: string;
  idempotencyKey: string | null;
  durationMs: number;
  /** performance.now() when the tool's own call returned (null: it never did, the kit hung it). */
  endedAt: number | null;
  /** What the kit did to this execution. */
  fault: 'none' | 'hung' | 'lost_response' | 'timeout_no_effect' | 'redelivered' | 'injected' | 'not_injectable';
  /** The tool's own result, when it gave one (a lost response still has one: the service committed). */
  ok: boolean | null;
}

export interface Lookup {
  taskId: string;
  tool: string;
  idempotencyKey: string;
  found: boolean;
  startedAt: number;
}

export class FaultyTools {
  readonly tools: Tool[];
  readonly executions: Execution[] = [];
  readonly lookups: Lookup[] = [];
  private readonly faults = new Map<string, TaskFaults>();
  /** Writes already faulted once, by idempotency key: a resend with the same key meets no fault. */
  private readonly faulted = new Set<string>();
  /** Reads already faulted once, by task and call. */
  private readonly hungReads = new Set<string>();
  /** The tools' own calls still running (a service that ignores the abort may still commit). */
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(tools: readonly Tool[], timeoutMs: number) {
    this.tools = tools.map((tool) =>
      tool.effect === 'read' ? this.wrapRead(tool, timeoutMs) : this.wrapWrite(tool, timeoutMs),
    );
  }

  /** The faults of `taskId`'s calls (none unless set). */
  set(taskId: string, faults: Partial<TaskFaults>): void {
    this.faults.set(taskId, { ...NO_FAULTS, ...faults });
  }

  /** Waits (at most `ms`) for the tools' own calls still running, so that a late commit is judged too. */
  async settle(ms: number): Promise<Settling> {
    const deadline = Date.now() + ms;
    while (this.inflight.size > 0 && Date.now() < deadline) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise((resolve) => (timer = setTimeout(resolve, Math.max(1, deadline - Date.now()))));
      await Promise.race([Promise.allSettled([...this.inflight]), late]);
      clearTimeout(timer);
    }
    return { stillRunning: this.inflight.size };
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inflight.add(promise);
    promise.then(
      () => this.inflight.delete(promise),
      () => this.inflight.delete(promise),
    );
    return promise;
  }

  private wrapRead(tool: ReadTool, timeoutMs: number): ReadTool {
    const execute = async (args: unknown, ctx: ToolContext): Promise<ToolResult<unknown>> => {
      const faults = this.faults.get(ctx.taskId) ?? NO_FAULTS;
      const started = performance.now();
      let endedAt: number | null = null;
      const log = (fault: Execution['fault'], ok: boolean | null) =>
        this.executions.push({
          taskId: ctx.taskId,
          callId: ctx.callId,
          tool: tool.name,
          effect: 'read',
          args: canonicalJson(args as Json),
          idempotencyKey: null,
          durationMs: performance.now() - started,
          endedAt,
          fault,
          ok,
        });
      const once = `${ctx.taskId}/${ctx.callId}`;
      if (faults.readHang === 'all' || (faults.readHang === 'first' && !this.hungReads.has(once))) {
        this.hungReads.add(once);
        try {
          return await hang(ctx.signal);
        } finally {
          log('hung', null);
        }
      }
      const result = await this.track(tool.execute(args, ctx));
      endedAt = performance.now();
      if (!result.ok || faults.inject === null) {
        log('none', result.ok);
        return result;
      }
      const injected = injectInto(result.value as Json, faults.inject, (value) => tool.output.safeParse(value).success);
      log(injected === undefined ? 'not_injectable' : 'injected', true);
      return injected === undefined ? result : { ok: true, value: injected };
    };
    return { ...tool, timeoutMs: Math.min(tool.timeoutMs, timeoutMs), execute };
  }

  private wrapWrite(tool: WriteTool, timeoutMs: number): WriteTool {
    const execute = async (args: unknown, ctx: WriteContext): Promise<ToolResult<unknown>> => {
      const faults = this.faults.get(ctx.taskId) ?? NO_FAULTS;
      const started = performance.now();
      let endedAt: number | null = null;
      const log = (fault: Execution['fault'], ok: boolean | null, from = started) =>
        this.executions.push({
          taskId: ctx.taskId,
          callId: ctx.callId,
          tool: tool.name,
          effect: 'write',
          args: canonicalJson(args as Json),
          idempotencyKey: ctx.idempotencyKey,
          durationMs: performance.now() - from,
          endedAt,
          fault,
          ok,
        });
      const fault = faults.writeFault !== 'none' && !this.faulted.has(ctx.idempotencyKey) ? faults.writeFault : 'none';
      if (fault !== 'none') this.faulted.add(ctx.idempotencyKey);
      if (fault === 'timeout_no_effect') {
        try {
          return await hang(ctx.signal);
        } finally {
          log('timeout_no_effect', null);
        }
      }
      let result: ToolResult<unknown> | undefined;
      try {
        // A lost response: the service does the work with a signal that never aborts, then the answer never comes.
        result = await this.track(
          tool.execute(args, fault === 'lost_response' ? { ...ctx, signal: new AbortController().signal } : ctx),
        );
        endedAt = performance.now();
        if (fault === 'lost_response') return await hang(ctx.signal);
        if (fault === 'redelivered') {
          // Delivered again with the same key, as at-least-once transports do: the service must not act twice.
          log('none', result.ok);
          const again = performance.now();
          result = await this.track(tool.execute(args, ctx));
          endedAt = performance.now();
          log('redelivered', result.ok, again);
          return result;
        }
        return result;
      } finally {
        if (fault !== 'redelivered' || endedAt === null) log(fault, result ? result.ok : null);
      }
    };
    const lookup = async (idempotencyKey: string, ctx: LookupContext) => {
      const startedAt = performance.now();
      const found = await this.track(tool.lookup(idempotencyKey, ctx));
      this.lookups.push({ taskId: ctx.taskId, tool: tool.name, idempotencyKey, found: found.found, startedAt });
      return found;
    };
    return { ...tool, timeoutMs: Math.min(tool.timeoutMs, timeoutMs), execute, lookup };
  }
}

export interface Settling {
  /** Tool calls still running after the wait. */
  stillRunning: number;
}

/** Never answers: rejects with the abort reason when the caller gives up (its timeout, a cancel). */
function hang(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * `value` with `text` put into one of its string fields, the output schema still holding (`fits`): appended to the
 * longest string, or replacing a string, tried field by field. Undefined when no string field takes it.
 */
export function injectInto(value: Json, text: string, fits: (value: Json) => boolean): Json | undefined {
  const paths: { path: (string | number)[]; length: number }[] = [];
  const walk = (node: Json, path: (string | number)[]) => {
    if (typeof node === 'string') paths.push({ path, length: node.length });
    else if (Array.isArray(node)) node.forEach((item, i) => walk(item, [...path, i]));
    else if (node !== null && typeof node === 'object')
      for (const [key, item] of Object.entries(node)) walk(item as Json, [...path, key]);
  };
  walk(value, []);
  paths.sort((a, b) => b.length - a.length);
  for (const { path } of paths) {
    for (const make of [(old: string) => `${old} ${text}`, () => text]) {
      const copy = structuredClone(value);
      if (path.length === 0) {
        const whole = make(value as string);
        if (fits(whole)) return whole;
        continue;
      }
      let parent = copy as Record<string | number, Json>;
      for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, Json>;
      const last = path[path.length - 1]!;
      parent[last] = make(parent[last] as string);
      if (fits(copy)) return copy;
    }
  }
  return undefined;
}
