/**
 * Inspection: the offline stream (messages, the JSON-lines sink, the local WebSocket sink) on real demo runs, and
 * the Stately inspector relay: it receives frames and releases its port on stop. That a process using it exits on
 * its own is in inspect.process.test.ts. Nothing here is on by default: every test turns inspection on for itself.
 */
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { scenarios } from '../examples/booking/scenarios.js';
import { type InspectionMessage, createInspectionStream, toSafeJson } from '../src/inspect/inspectionStream.js';
import { jsonLinesFileSink, parseJsonLines } from '../src/inspect/jsonLinesSink.js';
import { createStatelyInspection } from '../src/inspect/statelyInspector.js';
import { webSocketSink } from '../src/inspect/webSocketSink.js';
import type { Principal } from '../machines/context.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { type ScriptStep, reply } from '../src/testing/scriptedModel.js';
import { E17, MEETING, SUPPORT, harness, reserveArgs } from './support/harness.js';
import { openViewer } from './support/statelyViewer.js';

type Harness = ReturnType<typeof harness>;

const sockets: WebSocket[] = [];
const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  for (const close of closers.splice(0)) await close().catch(() => {});
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'inspect-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** A WebSocket client that collects every JSON frame it receives. */
async function collect(url: string): Promise<{ frames: unknown[]; socket: WebSocket; closed: Promise<unknown> }> {
  const socket = new WebSocket(url);
  sockets.push(socket);
  const frames: unknown[] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  const closed = once(socket, 'close');
  await once(socket, 'open');
  return { frames, socket, closed };
}

const ofTask = (messages: InspectionMessage[], taskId: string) => messages.filter((m) => m.taskId === taskId && m.root);

describe('inspection stream', () => {
  it('sends actor, event and snapshot messages of the task actor, in order, to a local WebSocket client', async () => {
    const sink = await webSocketSink({ port: 0 });
    closers.push(() => sink.close());
    expect(sink.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    const client = await collect(sink.url);
    const result = await scenarios.conflict({ store: new MemoryStore(), inspect: createInspectionStream(sink) });
    expect(result.status.state).toBe('done');
    await sink.close();
    await client.closed;

    const messages = client.frames as InspectionMessage[];
    const task = ofTask(messages, 'conflict-1');
    // Registered, initialized, then in its first state; `seq` orders everything.
    expect(task.slice(0, 3).map((m) => [m.type, m.event?.type ?? null, m.snapshot?.value ?? null])).toEqual([
      ['@xstate.actor', null, null],
      ['@xstate.event', 'xstate.init', null],
      ['@xstate.snapshot', 'xstate.init', 'thinking'],
    ]);
    const seqs = messages.map((m) => m.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(messages.map((m) => m.type))).toEqual(
      new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']),
    );
    // The snapshots walk the conflict path and end in done, with the context's headline.
    const values = task.filter((m) => m.type === '@xstate.snapshot').map((m) => JSON.stringify(m.snapshot!.value));
    // The search's hooks answer at once (`hooks: 'sync'`): judged in one step, the task rests next in `reading`.
    const search = ['"thinking"', '{"executing":"reading"}'];
    // Right before the write, its hooks are asked again (`executing.rechecking.hooks`).
    const reserve = [
      '"thinking"',
      '{"vetting":"validating"}',
      '{"vetting":"authorizing"}',
      '{"executing":{"rechecking":"hooks"}}',
      '{"executing":"writing"}',
    ];
    expect(values).toEqual([...search, ...reserve, ...search, ...reserve, '"thinking"', '"done"']);
    const last = task.at(-1)!;
    expect(last.snapshot).toMatchObject({
      status: 'done',
      context: { taskId: 'conflict-1', turn: 5, outcome: { status: 'done', code: 'goal_met' } },
    });
    // Every event the task received is there, each before the snapshot it produced.
    const events = task.filter((m) => m.type === '@xstate.event').map((m) => m.event!.type);
    expect(events.filter((t) => t === 'xstate.done.actor.model')).toHaveLength(5);
    expect(events).toContain('xstate.done.actor.write');
    // The invoked children stream too, as children of the task actor.
    const children = messages
      .filter((m) => m.taskId === 'conflict-1' && m.type === '@xstate.actor' && !m.root)
      .map((m) => m.actorId);
    const searching = ['model', 'reads'];
    const reserving = ['model', 'validate', 'authorize', 'recheck', 'write'];
    expect(children).toEqual([...searching, ...reserving, ...searching, ...reserving, 'model']);
    // Compact: no message carries a snapshot's actor refs or the machine.
    for (const m of messages) expect(JSON.stringify(m).length).toBeLessThan(6_000);
  });

  describe('shows each refusal by the name of the guard or state that made it', () => {
    /** Runs `script` for `principal` with microsteps on; returns the transitions taken, as `source [guard] / actions`. */
    async function transitionsOf(
      script: ScriptStep[],
      principal: Principal,
      after?: (h: Harness, taskId: string) => Promise<unknown>,
    ) {
      const messages: InspectionMessage[] = [];
      const h = harness({ script, inspect: createInspectionStream((m) => messages.push(m), { microsteps: true }) });
      const status = await h.orchestrator.run({ principal, goal: 'g' });
      await after?.(h, status.taskId);
      await h.orchestrator.close();
      const transitions = messages
        .flatMap((m) => m.transitions ?? [])
        .map((t) => `${t.source} [${t.guard ?? ''}] / ${t.actions.join(', ')}`);
      const values = messages
        .filter((m) => m.type === '@xstate.snapshot' && m.root)
        .map((m) => JSON.stringify(m.snapshot!.value));
      return { transitions, values };
    }

    it('a schema refusal: in vetting.judging, by not doArgumentsMatchSchema', async () => {
      const { transitions } = await transitionsOf(
        [reply.call('find_available_rooms', { ...MEETING, attendees: 'three' }), reply.answer('x')],
        E17,
      );
      expect(transitions).toContain('agent.vetting.judging [not doArgumentsMatchSchema] / refuseForSchema');
    });

    it('a permission refusal for a missing scope: after its asynchronous validation, by not hasScopesForTool', async () => {
      const reader = { userId: 'E18', tenantId: 'acme', scopes: ['rooms:read'] };
      const { transitions } = await transitionsOf(
        [reply.call('reserve_room', reserveArgs()), reply.answer('x')],
        reader,
      );
      // reserve_room's business validation is asynchronous: its answer is judged by the rest of the gates.
      expect(transitions).toContain(
        'agent.vetting.validating [not hasScopesForTool] / passBusiness, refuseForPermission',
      );
    });

    it('a permission refusal of the resource: the vetting.authorizing state, by not isAuthorized', async () => {
      const executive = reserveArgs({ room_id: 'R1', expected_version: 3 });
      const { transitions, values } = await transitionsOf(
        [reply.call('reserve_room', executive), reply.answer('x')],
        E17,
      );
      expect(values).toContain('{"vetting":"authorizing"}');
      expect(transitions).toContain('agent.vetting.authorizing [not isAuthorized] / refuseForPermission');
    });

    it('a confirmation refusal: in executing.awaitingConfirmation, by the decider checks', async () => {
      const refund = reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' });
      const { transitions } = await transitionsOf([refund], SUPPORT, (h, taskId) =>
        h.orchestrator
          .status(taskId)
          .then((s) => h.orchestrator.confirm(taskId, { ...SUPPORT, userId: 'E99' }, s.pendingConfirmation!)),
      );
      expect(transitions).toContain(
        'agent.executing.awaitingConfirmation [not (isFromConfirmingUser and isNotSelfApproval and holdsApproverScope and isFirstDecisionOfApprover)] / refuseConfirmation',
      );
    });
  });

  it('writes parseable JSON lines to a file, the same messages a WebSocket client gets, and keeps tasks apart', async () => {
    const file = await jsonLinesFileSink(join(dir, 'refund.jsonl'));
    const ws = await webSocketSink({ port: 0 });
    closers.push(() => ws.close());
    const client = await collect(ws.url);
    const seen: InspectionMessage[] = [];
    const inspect = createInspectionStream((m) => {
      seen.push(m);
      file.write(m);
      ws.write(m);
    });
    await scenarios.refund({ store: new MemoryStore(), inspect });
    await scenarios.normal({ store: new MemoryStore(), inspect });
    await file.close();
    await ws.close();
    await client.closed;

    const text = await readFile(file.path, 'utf8');
    const lines = text.split('\n').filter((l) => l !== '');
    expect(lines.length).toBe(seen.length);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(parseJsonLines(text)).toEqual(seen);
    expect(client.frames).toEqual(seen);
    // The refund task is unloaded while it waits and reloaded for each answer: a new root actor (session) each
    // time, all tagged with the one task id.
    expect(new Set(seen.map((m) => m.taskId))).toEqual(new Set(['refund-1', 'normal-1']));
    const refundRoots = new Set(ofTask(seen, 'refund-1').map((m) => m.sessionId));
    expect(refundRoots.size).toBeGreaterThan(2);
    expect(ofTask(seen, 'refund-1').filter((m) => m.type === '@xstate.actor')).toHaveLength(refundRoots.size);
    // Host events are streamed with their fields, the user's decisions included.
    const hostEvents = ofTask(seen, 'refund-1').filter(
      (m) => m.type === '@xstate.event' && /^(user|task)\./.test(m.event!.type),
    );
    expect(hostEvents.map((m) => m.event!.type)).toEqual(['user.confirmed', 'user.confirmed']);
    expect(hostEvents[0]!.event).toMatchObject({ userId: 'E99', confirmationId: 'refund-1/t3.c1.r1' });
    expect(hostEvents[1]!.event).toMatchObject({
      userId: 'E17',
      confirmationId: 'refund-1/t3.c1.r1',
      scopes: ['orders:read', 'refunds:write'],
    });
    const waiting = ofTask(seen, 'refund-1').find(
      (m) => JSON.stringify(m.snapshot?.value) === '{"executing":"awaitingConfirmation"}',
    );
    expect(waiting?.snapshot?.context).toMatchObject({
      mandate: { kind: 'refund', terms: { order_id: 'O-1001', max_amount_cents: 19_900 } },
      pendingConfirmation: {
        id: 'refund-1/t3.c1.r1',
        tool: 'refund_order',
        approverScope: null,
        approvals: 0,
        approvalsRequired: 1,
      },
    });
  });

  it('includes actions and microsteps only when asked', async () => {
    const plain: InspectionMessage[] = [];
    const detailed: InspectionMessage[] = [];
    const inspectPlain = createInspectionStream((m) => plain.push(m));
    const inspectDetailed = createInspectionStream((m) => detailed.push(m), { actions: true, microsteps: true });
    await scenarios.normal({ store: new MemoryStore(), inspect: (e) => (inspectPlain(e), inspectDetailed(e)) });
    expect(plain.some((m) => m.type === '@xstate.action' || m.type === '@xstate.microstep')).toBe(false);
    const actions = detailed.filter((m) => m.type === '@xstate.action');
    expect(actions.map((m) => m.action!.type)).toContain('xstate.emit');
    const micro = detailed.find(
      (m) => m.type === '@xstate.microstep' && m.transitions!.some((t) => t.targets.includes('agent.vetting')),
    );
    expect(micro?.transitions).toContainEqual({
      event: 'model.toolsProposed',
      source: 'agent.thinking',
      targets: ['agent.vetting'],
      guard: null,
      actions: ['acceptProposal'],
    });
  });

  it('serializes free-form values safely: actor refs, errors, cycles, depth and size are bounded', () => {
    const ref = { id: 'model', sessionId: 'x:1', send: () => {}, getSnapshot: () => ({}) };
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    const value = {
      ref,
      error: new TypeError('boom'),
      cyclic,
      deep: { a: { b: { c: { d: { e: { f: 1 } } } } } },
      long: 'x'.repeat(1_000),
      many: Array.from({ length: 30 }, (_, i) => i),
      fn: () => 1,
      big: 10n,
      nan: Number.NaN,
    };
    const safe = toSafeJson(value) as Record<string, unknown>;
    expect(() => JSON.stringify(safe)).not.toThrow();
    expect(safe.ref).toEqual({ $actor: 'model' });
    expect(safe.error).toEqual({ $error: 'TypeError', message: 'boom' });
    expect(safe.cyclic).toEqual({ name: 'loop', self: '[circular]' });
    expect(JSON.stringify(safe.deep)).toContain('[…]');
    expect((safe.long as string).length).toBe(300);
    expect((safe.many as unknown[]).at(-1)).toBe('[+18 more]');
    expect('fn' in safe).toBe(false);
    expect([safe.big, safe.nan]).toEqual(['10', 'NaN']);
  });
});

describe('Stately inspector relay', () => {
  it('relays the task actor frames to a viewer, then releases the port and disconnects the viewer on stop', async () => {
    const inspection = await createStatelyInspection({ port: 0 });
    closers.push(() => inspection.stop());
    expect(inspection.origin).toBe(`http://127.0.0.1:${inspection.port}`);
    const page = await fetch(inspection.url).then((r) => r.text());
    expect(page).toContain("new WebSocket(scheme + location.host + '/?token='");
    const viewer = await openViewer(inspection.url);

    const result = await scenarios.normal({ store: new MemoryStore(), inspect: inspection.inspect });
    expect(result.status.state).toBe('done');
    await inspection.stop();
    await viewer.closed;

    const frames = viewer.frames as {
      type: string;
      sessionId: string;
      rootId?: string;
      event?: { type: string };
      snapshot?: { value?: unknown };
    }[];
    expect(new Set(frames.map((f) => f.type))).toEqual(new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']));
    const rootId = frames.find((f) => f.type === '@xstate.actor')!.sessionId;
    const root = frames.filter((f) => f.sessionId === rootId);
    expect(root[0]!.type).toBe('@xstate.actor');
    expect(root.filter((f) => f.type === '@xstate.snapshot').at(-1)!.snapshot!.value).toBe('done');
    // The port is free again.
    const probe = createServer();
    probe.listen(inspection.port);
    await once(probe, 'listening');
    await new Promise((resolve) => probe.close(resolve));
  });

  it('reports a port in use instead of crashing the process', async () => {
    const blocker = createServer().listen(0);
    await once(blocker, 'listening');
    closers.push(() => new Promise((resolve) => blocker.close(() => resolve())));
    const port = (blocker.address() as { port: number }).port;
    await expect(createStatelyInspection({ port })).rejects.toThrow(`port ${port} is in use`);
  });
});
