/**
 * Adversarial cases of the live text of a turn (`liveText`, the model actor's side of modelText.ts): what a late
 * adapter or a tool name written in pieces must not show.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ActorHost } from '../src/runtime/actorHost.js';
import { liveText } from '../src/runtime/actors/modelLive.js';
import { ModelTextBus, type ModelTextEvent } from '../src/runtime/modelText.js';
import { LIVE_ARGUMENTS_WITHHELD } from '../src/runtime/sealing.js';
import { ToolRegistry } from '../src/runtime/toolRegistry.js';
import { defineTool } from '../src/tool.js';

const tool = (name: string, sensitive: boolean) =>
  defineTool({
    name,
    description: `${name}. Read-only.`,
    effect: 'read',
    scopes: [],
    input: z.strictObject({ card_number: z.string() }),
    output: z.strictObject({ ok: z.boolean() }),
    ...(sensitive ? { sensitive: { args: ['card_number'] } } : {}),
    timeoutMs: 1_000,
    async execute() {
      return { ok: true, value: { ok: true } };
    },
  });

function setup(tools = [tool('pay', false), tool('pay_card', true)]) {
  const bus = new ModelTextBus();
  const seen: ModelTextEvent[] = [];
  bus.watch('t', (e) => seen.push(e), { calls: true });
  const host = { modelText: bus, registry: new ToolRegistry(tools) } as unknown as ActorHost;
  const live = liveText(host, 't', 1, 1, { taskId: 't', tenantId: 'acme', startedAt: 0 })!;
  return { live, seen };
}

const CARD = '{"card\\u005fnumber": "4000056655665556", "x": 1}';

describe('live text of a turn, adversarial', () => {
  it('shows nothing of an attempt once it was discarded (an adapter still writing after a timeout)', () => {
    const { live, seen } = setup();
    live.push('First line.\n');
    live.call({ index: 0, callId: 'c1', name: 'pay', arguments: '{"a": "b", ' });
    live.discard();
    const at = seen.length;
    live.push('Late text.\nMore.\n');
    live.call({ index: 0, arguments: '"c": "d"}' });
    live.call({ index: 1, callId: 'c2', name: 'pay', arguments: '{"e": "f"}' });
    live.finish();
    expect(seen.at(at - 1)?.kind).toBe('discarded');
    expect(seen.slice(at)).toEqual([]);
  });

  it('shows nothing more once the turn is finished', () => {
    const { live, seen } = setup();
    live.push('Done.\n');
    live.finish();
    const at = seen.length;
    live.push('Late.\n');
    live.discard();
    expect(seen.slice(at)).toEqual([]);
  });

  it('withholds the arguments while the tool name may still grow into a sensitive tool (name in pieces)', () => {
    const { live, seen } = setup();
    // Chat Completions may write a name in pieces: "pay" is a tool without sensitive fields, "pay_card" has some.
    live.call({ index: 0, callId: 'c1', name: 'pay', arguments: CARD.slice(0, 40) });
    live.call({ index: 0, name: 'pay_card', arguments: CARD.slice(40) });
    live.finish();
    expect(JSON.stringify(seen)).not.toContain('4000');
    expect(seen.filter((e) => e.kind === 'call').at(-1)).toMatchObject({ text: LIVE_ARGUMENTS_WITHHELD });
  });

  it('withholds the arguments of a call to a tool nobody installed (a partial or an invented name)', () => {
    const { live, seen } = setup();
    live.call({ index: 0, callId: 'c1', name: 'pay_', arguments: CARD });
    live.finish();
    expect(JSON.stringify(seen)).not.toContain('4000');
  });

  it('still shows the arguments of a whole name of a tool without sensitive fields', () => {
    const { live, seen } = setup([tool('pay', false)]);
    live.call({ index: 0, callId: 'c1', name: 'pay', arguments: '{"card_number": "x", "y": 1}' });
    live.finish();
    const shown = seen.filter((e): e is Extract<ModelTextEvent, { kind: 'call' }> => e.kind === 'call');
    expect(shown.map((e) => e.text).join('')).toContain('"y": 1');
  });

  it('shows the arguments of a plan being proposed (the host tool)', () => {
    const { live, seen } = setup();
    live.call({ index: 0, callId: 'c1', name: 'propose_plan', arguments: '{"steps": ["look"], "n": 1}' });
    live.finish();
    const shown = seen.filter((e): e is Extract<ModelTextEvent, { kind: 'call' }> => e.kind === 'call');
    expect(shown.map((e) => e.text).join('')).toBe('{"steps": ["look"], "n": 1}');
  });
});
