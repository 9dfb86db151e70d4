/**
 * A task's events as Server-Sent Events, read from its audit journal: one event per entry (named by kind: `gate`,
 * `check`, `confirmation`, `tool`, `lookup`, `review`, `stop`, `entry` for the rest), with the chart state the
 * journal shows after it, and a `status` event after each entry that changed the task's status
 * (running → waiting_for_confirmation → ... → done). Event ids come from the journal: `N` is entry N, `N.status`
 * the status event that followed it. A client that reconnects with `Last-Event-ID` gets exactly what came after
 * that id, so nothing is lost and nothing is sent twice. When the task has ended and every entry was sent, an
 * `end` event (no id) closes the stream.
 *
 * While a model turn is written by a streaming adapter in this process, `model_text` events (no id) carry its text,
 * redacted: `{ kind: 'text', turn, attempt, text, replace }` to append (or, with `replace`, to show instead), and
 * `{ kind: 'discarded', turn, attempt }` when the attempt failed. They are not journal entries: a reconnect does not
 * get them again, and the turn's entry, when it comes, is the record. The tool calls the model is writing come as
 * `model_call` events (`{ kind: 'call', turn, attempt, index, callId, name, text, replace, proposed: true, label }`,
 * `label` "proposed, not yet checked"): unvetted proposals, redacted by the same rule (arguments of a tool with
 * sensitive fields withheld whole), never a decision: the chart checks the calls only once the turn is whole. Both
 * reach the caller wherever the task is driven: in this process, or by a worker elsewhere on the same Redis.
 *
 * New entries are read when the task is saved, wherever it is driven (`orchestrator.watchTask`): on a store that
 * announces saves (Redis: pub/sub published by the save script; MemoryStore) every API instance hears of every save
 * at once and reads the journal from the last entry it sent, so entries arrive in order, without gap or duplicate,
 * whichever worker drives the task. The store is also polled: every `pollMs` while saves elsewhere may go
 * unannounced (a store without notifications, a subscriber connection that is down), only every `livePollMs` as a
 * safety net while they are announced.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditEntry } from '../../machines/journal.js';
import { EMPTY_REPLAY, type ReplayedTask, atCurrentState, foldAuditEntry } from '../audit/replayAudit.js';
import type { AuditRecord, Orchestrator } from '../orchestrator/orchestrator.js';
import { serviceError } from './serviceError.js';

export interface SseOptions {
  /** How often the store is polled while saves by other processes may go unannounced (default 2 s). */
  pollMs: number;
  /** How often it is polled, as a safety net, while the store announces every save (default 30 s). */
  livePollMs?: number;
  /** A comment line keeps proxies from closing an idle stream (default 15 s). */
  heartbeatMs: number;
}

/**
 * The streams this service has open, so that closing the server ends them: a hijacked response is not Fastify's to
 * close, and a page never leaves by itself, so without this a deploy waits on every open tab.
 */
export class OpenStreams {
  private readonly closers = new Set<() => void>();
  private closing = false;

  /** Registers a stream's closer; returns the function that unregisters it. */
  add(close: () => void): () => void {
    if (this.closing) {
      close();
      return () => {};
    }
    this.closers.add(close);
    return () => this.closers.delete(close);
  }

  get size(): number {
    return this.closers.size;
  }

  /** Ends every open stream (and every stream opened from now on): the server is closing. */
  closeAll(): void {
    this.closing = true;
    for (const close of [...this.closers]) close();
    this.closers.clear();
  }
}

/** How a `model_call` event names what it carries: a call being written, which nothing has checked yet. */
export const PROPOSED_LABEL = 'proposed, not yet checked';

const EVENT_NAMES: Partial<Record<AuditEntry['kind'], string>> = {
  gate: 'gate',
  check_started: 'check',
  confirmation: 'confirmation',
  tool_started: 'tool',
  tool_finished: 'tool',
  write_lookup: 'lookup',
  review: 'review',
  presence: 'presence',
  compensation_started: 'compensation',
  compensation_finished: 'compensation',
  task_stopped: 'stop',
};

/** Where a resumed stream continues: after entry `seq`, and after its status event too when `statusSent`. */
export interface ResumePoint {
  seq: number;
  statusSent: boolean;
}

export async function streamTaskEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  orchestrator: Orchestrator,
  taskId: string,
  resume: ResumePoint | null,
  options: SseOptions,
  /** Asked before each read of new entries: a caller who may no longer see the task (an approver, once decided) is cut off. */
  stillVisible: () => Promise<boolean> = async () => true,
  /**
   * Where the stream registers itself, so that the server's close ends it with a `shutdown` event: the client's
   * EventSource reconnects (to another instance behind the balancer) with Last-Event-ID and misses nothing.
   */
  streams?: OpenStreams,
  /**
   * Whether the caller gets `model_text`: the turns' text is the transcript as it is written (it may quote tools'
   * results), so only for those who may read the task's history (its user, an operator), not an approver.
   */
  modelText = true,
): Promise<void> {
  const history = await orchestrator.audit(taskId);
  if (resume && resume.seq >= history.length) {
    throw serviceError(
      400,
      'unknown_event_id',
      `event ${resume.seq} was never sent: the task has ${history.length} entries`,
    );
  }
  // A journal written before transitions were recorded: its last entry shows the state the task is in now.
  const current = history.length > 0 && history.at(-1)!.moves === undefined ? await orchestrator.status(taskId) : null;
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.write('retry: 1000\n\n');

  let replayed: ReplayedTask = EMPTY_REPLAY;
  let next = 0;
  let closed = false;
  const write = (text: string) => {
    if (!closed) raw.write(text);
  };
  const emit = (record: AuditRecord, skipEntry: boolean, skipStatus: boolean) => {
    const before = replayed.status;
    const { seq, ...entry } = record;
    replayed = foldAuditEntry(replayed, entry as AuditEntry, seq);
    if (current && seq === history.length - 1) replayed = atCurrentState(replayed, current.stateValue);
    next = seq + 1;
    if (!skipEntry) {
      const data = { seq, kind: entry.kind, entry: record, state: replayed.state, status: replayed.status };
      write(`id: ${seq}\nevent: ${EVENT_NAMES[entry.kind] ?? 'entry'}\ndata: ${JSON.stringify(data)}\n\n`);
    }
    if (replayed.status !== before && !skipStatus) {
      const data = { seq, state: replayed.state, status: replayed.status, previous: before };
      write(`id: ${seq}.status\nevent: status\ndata: ${JSON.stringify(data)}\n\n`);
    }
  };
  const finishIfEnded = () => {
    if (replayed.outcome && !closed) {
      write('event: end\ndata: {}\n\n');
      stop();
      raw.end();
    }
  };

  for (const record of history) {
    const sent = resume !== null && record.seq <= resume.seq;
    emit(record, sent, sent && (record.seq < resume!.seq || resume!.statusSent));
  }

  let chain: Promise<void> = Promise.resolve();
  let lastRead = performance.now();
  const pump = () => {
    chain = chain
      .then(async () => {
        if (closed) return;
        lastRead = performance.now();
        if (!(await stillVisible())) {
          write('event: end\ndata: {"reason":"no_longer_visible"}\n\n');
          stop();
          raw.end();
          return;
        }
        for (const record of await orchestrator.audit(taskId, next)) emit(record, false, false);
        finishIfEnded();
      })
      .catch((error: unknown) => {
        request.log.warn({ err: error, taskId }, 'task event stream could not read the journal');
      });
  };
  const watch = orchestrator.watchTask(taskId, (change) => {
    // A save whose entries were all sent already (its word came after the journal was read) needs no read.
    if (change.kind === 'saved' && change.audit <= next) return;
    pump();
  });
  // The model's text as it is written (streaming adapters, wherever the task is driven): redacted, ephemeral, and
  // without an id, so a reconnect resumes the journal where it was and never asks for text again.
  const unwatchText = modelText
    ? orchestrator.watchModelText(
        taskId,
        (event) => {
          const { taskId: _task, ...data } = event;
          if (data.kind === 'call')
            write(`event: model_call\ndata: ${JSON.stringify({ ...data, label: PROPOSED_LABEL })}\n\n`);
          else write(`event: model_text\ndata: ${JSON.stringify(data)}\n\n`);
        },
        { calls: true },
      )
    : () => {};
  const livePollMs = options.livePollMs ?? 30_000;
  const poll = setInterval(
    () => {
      if (!watch.live || performance.now() - lastRead >= livePollMs) pump();
    },
    Math.min(options.pollMs, livePollMs),
  );
  const heartbeat = setInterval(() => write(': keep-alive\n\n'), options.heartbeatMs);
  function stop() {
    closed = true;
    watch.stop();
    unwatchText();
    clearInterval(poll);
    clearInterval(heartbeat);
  }
  const unregister = streams?.add(() => {
    if (closed) return;
    write('event: shutdown\ndata: {"reason":"server_closing"}\n\n');
    stop();
    raw.end();
  });
  raw.on('close', () => {
    stop();
    unregister?.();
  });
  // Entries saved between the first read and the subscription are read now.
  pump();
  finishIfEnded();
}
