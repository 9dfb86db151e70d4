/**
 * The steps, guards and save texts against the code before the read-round garbage cuts (3ff0330, e1adb06) and the
 * save-path rework (7bb5a30, 79c1030): edge-case tasks (several reads in one round, refusals of every gate among
 * accepted calls, an empty batch, duplicate keys and ids, unicode and large arguments, a confirmation from another
 * session, a loop stop) give the audit, transcript, snapshot, Redis audit messages and envelope texts that d116778
 * gave, byte for byte (each part's SHA-256 below was taken on d116778 with this very file).
 *
 * A deliberate change to any of these (a new audit field, another packing) changes the hashes: check what changed
 * against the part named in the failure, then take the new hashes with `GOLDEN_PRINT=1`.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { defineTool } from '../src/tool.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { packAudit } from '../src/store/redis/redisAuditPacking.js';
import { envelopeText } from '../src/store/redis/redisEnvelopeText.js';
import type { SaveRequest, TaskStore } from '../src/store/taskStore.js';

const USER = { userId: 'u1', tenantId: 't1', scopes: ['r', 'w'], sessionId: 's1' };
const huge = 'ü日😀'.repeat(3000);
const big = 'ü日😀\u2028"\\'.repeat(300);

function tools() {
  const read = (name: string, validate?: (a: { q: string }) => unknown) =>
    defineTool({
      name,
      description: name,
      effect: 'read',
      timeoutMs: 1000,
      scopes: ['r'],
      input: z.strictObject({ q: z.string() }),
      output: z.strictObject({ got: z.string(), id: z.string() }),
      hooks: 'sync',
      ...(validate ? { validate } : {}),
      execute: async ({ q }: { q: string }) =>
        q === 'fail'
          ? { ok: false, code: 'not_found', summary: 'no such thing', retryable: false }
          : { ok: true, value: { got: q.slice(0, 50), id: `id-${q.length}` } },
    } as never);
  const write = defineTool({
    name: 'put',
    description: 'put',
    effect: 'write',
    timeoutMs: 1000,
    scopes: ['w'],
    sameKeyRetrySafe: true,
    input: z.strictObject({ q: z.string() }),
    output: z.strictObject({ ok: z.boolean() }),
    hooks: 'sync',
    confirm: (args: { q: string }) => args.q.startsWith('ask'),
    execute: async () => ({ ok: true, value: { ok: true } }),
    lookup: async () => ({ found: false as const }),
  } as never);
  return [
    read('find'),
    read('scan', (a) => (a.q === 'no' ? { ok: false, code: 'refused', summary: 'not this one é' } : { ok: true })),
    read('peek'),
    write,
  ];
}

const scenarios: Record<string, Parameters<typeof scriptedModel>[0]> = {
  severalReads: [
    reply.calls(
      { name: 'find', args: { q: 'a' } },
      { name: 'scan', args: { q: 'b' } },
      { name: 'peek', args: { q: 'c' } },
    ),
    reply.calls({ name: 'find', args: { q: 'a' } }, { name: 'find', args: { q: 'fail' } }),
    reply.answer('done'),
  ],
  refusedAmongAccepted: [
    reply.calls(
      { name: 'find', args: { q: 'x' } },
      { name: 'scan', args: { q: 'no' } },
      { name: 'peek', args: { q: 'y', extra: 1 } },
      { name: 'nope', args: { q: 'z' } },
    ),
    reply.calls({ name: 'scan', args: { q: 'no' } }),
    reply.calls({ name: 'put', args: { q: 'go' } }, { name: 'find', args: { q: 'after' } }),
    reply.answer('done'),
  ],
  unicodeHuge: [
    reply.calls({ name: 'find', args: { q: huge } }, { name: 'scan', args: { q: '\u2028 "quoted" \\ \ud800' } }),
    reply.calls({ name: 'put', args: { q: `ask ${huge.slice(0, 500)}` } }),
    reply.answer('done'),
  ],
  emptyBatch: [
    { type: 'tool_calls', calls: [] } as never,
    reply.calls({ name: 'find', args: { q: 'a' } }, { name: 'find', args: { q: 'a' } }),
    reply.calls({ name: 'find', args: '{"q":"a","q":"b"}' }),
    reply.calls({ name: 'find', args: { q: 'a' }, callId: 'dup' }, { name: 'peek', args: { q: 'b' }, callId: 'dup' }),
    reply.answer('done'),
  ],
  mixedRefusals: [
    reply.calls(
      { name: 'find', args: { q: 'x' } },
      { name: 'scan', args: { q: 'no' } },
      { name: 'peek', args: { q: 'y', extra: 1 } },
      { name: 'find', args: { q: big } },
      { name: 'peek', args: { q: 'fail' } },
    ),
    reply.calls(
      { name: 'put', args: { q: 'ask again' } },
      { name: 'scan', args: { q: 'no' } },
      { name: 'find', args: { q: 'z' } },
    ),
    reply.calls({ name: 'find', args: { q: big } }),
    reply.answer('done'),
  ],
  repeats: [
    reply.calls({ name: 'find', args: { q: 'r' } }),
    reply.calls({ name: 'find', args: { q: 'r' } }),
    reply.calls({ name: 'find', args: { q: 'r' } }),
    reply.calls({ name: 'find', args: { q: 'r' } }),
    reply.answer('done'),
  ],
};

const sha = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);

/** Each part of one scenario's run, hashed. */
async function partsOf(name: string, script: Parameters<typeof scriptedModel>[0]): Promise<Record<string, string>> {
  const memory = new MemoryStore();
  const saves: SaveRequest[] = [];
  const store = new Proxy(memory, {
    get(target, key) {
      if (key === 'save')
        return (request: SaveRequest) => {
          saves.push(structuredClone(request));
          return target.save(request);
        };
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as TaskStore;
  const clock = new ManualClock(1_700_000_000_000);
  let seed = 1;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return seed / 2147483647;
  };
  const o = createOrchestrator({
    tools: tools(),
    model: scriptedModel(script),
    store,
    clock,
    random,
    expirySweepMs: 0,
  });
  try {
    let status = await o.run({ principal: USER, goal: 'g', taskId: name });
    if (status.state === 'waiting_for_confirmation') {
      await o.confirm(name, { ...USER, sessionId: 's2' }, status.pendingConfirmation!);
      await clock.advance(5);
      status = await o.settled(name);
    }
    return {
      status: sha([status.state, status.outcome]),
      audit: sha(await o.audit(name)),
      transcript: sha(await o.transcript(name)),
      snapshot: sha((await memory.load(name))?.snapshot),
      packed: sha(saves.map((s) => packAudit(s.append.audit))),
      envelopes: sha(saves.map((s) => envelopeText(s.envelope as never).text)),
    };
  } finally {
    await o.close();
  }
}

/** Taken on d116778 (`GOLDEN_PRINT=1`). */
const BEFORE: Record<string, Record<string, string>> = {
  severalReads: {
    status: '39be65062fcdcb71',
    audit: 'a60d20c98ac2e41d',
    transcript: '4284a752ff32d828',
    snapshot: '74a0bdbe5411ca27',
    packed: 'e95800e3456f622a',
    envelopes: '6d27610649dbcc21',
  },
  refusedAmongAccepted: {
    status: '96d417c64535ec89',
    audit: '8705b0f6126728d9',
    transcript: 'b1f3aa8faf02c5af',
    snapshot: '45b852e9a604fa47',
    packed: '269fbb8bbb608ba7',
    envelopes: 'b6349b2243eec591',
  },
  unicodeHuge: {
    status: 'ef8b1b9b40798976',
    audit: '2b33a7c2b7e380f7',
    transcript: 'aa8b5e99625253bc',
    snapshot: 'b98740db9daa990d',
    packed: '5263310a66816097',
    envelopes: '1c30f25e5c35edd3',
  },
  emptyBatch: {
    status: '14ece57eaa80acc7',
    audit: 'da84d9915c9dacb6',
    transcript: '693725279b038415',
    snapshot: '82c3daea108f0429',
    packed: '0ec93694acd53269',
    envelopes: '92152165c4f17ed9',
  },
  mixedRefusals: {
    status: 'c9e24dbca2bf9d31',
    audit: '6dbe368f2bb86e0e',
    transcript: '545de54112ed7ccb',
    snapshot: 'ca6499fcb8859af3',
    packed: '3bac9eb7e5182a17',
    envelopes: 'c081632af83a409a',
  },
  repeats: {
    status: '4626b3118347bce0',
    audit: '1f63dc97725ddc25',
    transcript: 'e4f24b6041ebe355',
    snapshot: '371c6cec570c03bb',
    packed: 'dbb85ccf04a70202',
    envelopes: '48d417b90526e517',
  },
};

describe('edge-case tasks against the code before the steps and save-path rework', () => {
  it.each(Object.keys(scenarios))('%s: the same audit, transcript, snapshot and save texts', async (name) => {
    const parts = await partsOf(name, scenarios[name]!);
    if (process.env.GOLDEN_PRINT) console.log(`GOLDEN ${JSON.stringify({ [name]: parts })}`);
    expect(parts).toEqual(BEFORE[name]);
  });
});
