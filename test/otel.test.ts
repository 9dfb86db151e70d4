/**
 * Tracing on OpenTelemetry, checked with the SDK's in-memory exporter: a span per run of a task, a child span per
 * model turn (GenAI attributes and token usage), per tool call and per write lookup; gate decisions and
 * confirmations as events on the run; a tool sees its span as the active one. Without `tracing`, nothing is traced.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { otelTracing } from '../src/otel.js';
import { defineTool } from '../src/tool.js';
import { reply } from '../src/testing/scriptedModel.js';
import { E17, harness } from './support/harness.js';
import { paymentTool } from './support/paymentTool.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('statechart-agent-test');

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(async () => {
  context.disable();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

const spans = () => exporter.getFinishedSpans();
const named = (prefix: string) => spans().filter((s) => s.name.startsWith(prefix));
const parentId = (span: ReadableSpan) => span.parentSpanContext?.spanId;

/** A read that notes which span is active while it runs. */
function lookTool(seen: (string | undefined)[]) {
  return defineTool({
    name: 'look_up',
    description: 'Looks something up.',
    effect: 'read',
    scopes: [],
    timeoutMs: 200,
    input: z.strictObject({ q: z.string() }),
    output: z.strictObject({ found: z.boolean() }),
    execute: async () => {
      seen.push((trace.getActiveSpan() as unknown as ReadableSpan | undefined)?.name);
      return { ok: true, value: { found: true } };
    },
  });
}

describe('otelTracing', () => {
  it('traces a task: its run, model turns with usage, tool calls and the lookup inside it, decisions as events', async () => {
    const seen: (string | undefined)[] = [];
    const payment = paymentTool({ sameKeyRetrySafe: true, timeoutMs: 50, hang: (n) => n === 1 });
    const { orchestrator } = harness({
      extraTools: [lookTool(seen), payment],
      script: [reply.call('look_up', { q: 'x' }), reply.call('send_payment', { amount: 5 }), reply.answer('Paid 5.')],
      tracing: otelTracing(tracer),
    });
    const status = await orchestrator.run({ principal: E17, goal: 'pay 5', taskId: 'traced' });
    expect(status.state).toBe('answered');

    const [run, ...more] = named('task run');
    expect(more).toEqual([]);
    expect(run!.attributes).toMatchObject({
      'statechart_agent.task_id': 'traced',
      'statechart_agent.state': 'answered',
      'statechart_agent.state_value': 'answered',
    });
    const turns = named('chat ');
    expect(turns).toHaveLength(3);
    for (const turn of turns) {
      expect(parentId(turn)).toBe(run!.spanContext().spanId);
      expect(turn.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'scripted',
        'statechart_agent.task_id': 'traced',
      });
      expect(turn.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(turn.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    }
    expect(turns.map((t) => t.attributes['statechart_agent.turn'])).toEqual([1, 2, 3]);
    // The read, the write that hung, its lookup and the resend with the same key, each a child of the run.
    const tools = named('execute_tool ');
    expect(tools.map((t) => [t.name, t.attributes['statechart_agent.call.code'], t.status.code])).toEqual([
      ['execute_tool look_up', 'ok', 0],
      ['execute_tool send_payment', 'timeout', 2],
      ['execute_tool send_payment', 'ok', 0],
    ]);
    expect(new Set(tools.map((t) => t.attributes['statechart_agent.idempotency_key']).filter(Boolean)).size).toBe(1);
    const [lookup] = named('lookup ');
    expect(lookup!.attributes).toMatchObject({
      'statechart_agent.lookup.result': 'not_found',
      'statechart_agent.tool.name': 'send_payment',
    });
    for (const span of [...tools, lookup!]) expect(parentId(span)).toBe(run!.spanContext().spanId);
    expect(new Set(spans().map((s) => s.spanContext().traceId)).size).toBe(1);
    // The tool ran with its own span active.
    expect(seen).toEqual(['execute_tool look_up']);
    // Gate decisions and the lookup's result are events of the run.
    const events = run!.events.map((e) => e.name);
    expect(events).toEqual(
      expect.arrayContaining(['gate schema pass', 'gate permission pass', 'write lookup not_found', 'task answered']),
    );
  });

  it('ends a run when the task waits for a confirmation, and starts another when it goes on', async () => {
    const { orchestrator } = harness({
      extraTools: [paymentTool({ confirm: 'always' })],
      script: [reply.call('send_payment', { amount: 7 }), reply.answer('Paid 7.')],
      tracing: otelTracing(tracer),
    });
    const waiting = await orchestrator.run({ principal: E17, goal: 'pay 7', taskId: 'two-runs' });
    expect(waiting.state).toBe('waiting_for_confirmation');
    expect(named('task run').map((r) => r.attributes['statechart_agent.state'])).toEqual(['waiting_for_confirmation']);
    expect(named('task run')[0]!.events.map((e) => e.name)).toContain('confirmation requested');
    const pending = waiting.pendingConfirmation!;
    await orchestrator.confirm('two-runs', E17, { id: pending.id, argsHash: pending.argsHash });
    await orchestrator.settled('two-runs');
    const runs = named('task run');
    expect(runs.map((r) => r.attributes['statechart_agent.state'])).toEqual(['waiting_for_confirmation', 'answered']);
    expect(runs[1]!.events.map((e) => e.name)).toContain('confirmation granted');
    expect(parentId(named('execute_tool send_payment')[0]!)).toBe(runs[1]!.spanContext().spanId);
  });

  it('traces nothing without the option', async () => {
    const { orchestrator } = harness({
      extraTools: [lookTool([])],
      script: [reply.call('look_up', { q: 'x' }), reply.answer('ok')],
    });
    await orchestrator.run({ principal: E17, goal: 'look', taskId: 'untraced' });
    expect(spans()).toEqual([]);
  });
});
