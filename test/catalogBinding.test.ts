/**
 * A task is bound to the tools it was started with (its catalog): a process drives it only if every tool the catalog
 * names is installed with the same effect and the recorded version, or one that declares it stands in for it
 * (`compatibleWith`). Several processes on one MemoryStore with leases stand for a deploy where some processes lack
 * a tool or run another version of it. The dispatch (BullMQ) side: catalogBinding.redis.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Catalog } from '../machines/context.js';
import { CatalogMismatchError, ToolDefinitionError } from '../src/errors.js';
import type { Logger } from '../src/orchestrator/hooks.js';
import { type Orchestrator, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { catalogDifferences } from '../src/runtime/catalogBinding.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { type Tool, defineTool, toolParametersSchema, toolVersion } from '../src/tool.js';
import { sha256Hex } from '../src/hashing.js';
import { z } from 'zod';
import { E17, until } from './support/harness.js';
import { clockedStore, leaseIsFree, noteWriter, readThenWrite, slowRead } from './support/takeover.js';

describe('toolVersion', () => {
  const tool = () =>
    defineTool({
      name: 'get_thing',
      description: 'Reads a thing.',
      effect: 'read',
      scopes: ['things:read'],
      timeoutMs: 1000,
      input: z.strictObject({ id: z.string() }),
      output: z.object({ name: z.string() }),
      execute: async () => ({ ok: true, value: { name: 'x' } }),
    });

  it('hashes the contract once per tool, and again when the tool was changed in place', () => {
    const thing = tool();
    const first = toolVersion(thing, sha256Hex);
    expect(first).toMatch(/^contract:[0-9a-f]{16}$/);
    expect(toolVersion(thing, sha256Hex)).toBe(first);
    expect(toolVersion(tool(), sha256Hex)).toBe(first);
    thing.description = 'Reads a thing, and its owner.';
    const described = toolVersion(thing, sha256Hex);
    expect(described).not.toBe(first);
    (thing as { scopes: string[] }).scopes = ['things:read', 'owners:read'];
    expect(toolVersion(thing, sha256Hex)).not.toBe(described);
    (thing as { input: z.ZodType }).input = z.strictObject({ id: z.string(), owner: z.boolean() });
    expect(toolVersion(thing, sha256Hex)).not.toBe(described);
  });

  it('gives the JSON Schema made once, frozen so no caller changes what the next one gets', () => {
    const thing = tool();
    const parameters = toolParametersSchema(thing);
    expect(parameters).toMatchObject({ type: 'object', properties: { id: { type: 'string' } } });
    expect(() => {
      (parameters.properties as Record<string, unknown>).extra = {};
    }).toThrow(TypeError);
    expect(toolParametersSchema(thing)).toStrictEqual(parameters);
  });
});

describe('catalogDifferences', () => {
  const recorded: Catalog = {
    get_order: { effect: 'read', sameKeyRetrySafe: false, version: 'contract:aaaa' },
    refund_order: { effect: 'write', sameKeyRetrySafe: true, version: '2.0.0' },
  };
  const installed =
    (tools: Record<string, { effect: 'read' | 'write'; version?: string; compatibleWith?: string[] }>) =>
    (name: string) => {
      const tool = tools[name];
      return tool && { effect: tool.effect, version: tool.version, compatibleWith: tool.compatibleWith ?? [] };
    };

  it.each([
    [
      'the same tools (and more)',
      {
        get_order: { effect: 'read', version: 'contract:aaaa' },
        refund_order: { effect: 'write', version: '2.0.0' },
        other: { effect: 'write', version: '1' },
      },
      [],
    ],
    [
      'a missing tool',
      { get_order: { effect: 'read', version: 'contract:aaaa' } },
      [{ tool: 'refund_order', problem: 'missing', task: '2.0.0', here: null }],
    ],
    [
      'another effect',
      { get_order: { effect: 'write', version: 'contract:aaaa' }, refund_order: { effect: 'write', version: '2.0.0' } },
      [{ tool: 'get_order', problem: 'effect', task: 'read', here: 'write' }],
    ],
    [
      'another version',
      { get_order: { effect: 'read', version: 'contract:bbbb' }, refund_order: { effect: 'write', version: '2.0.0' } },
      [{ tool: 'get_order', problem: 'version', task: 'contract:aaaa', here: 'contract:bbbb' }],
    ],
    [
      'a version that stands in for the recorded one',
      {
        get_order: { effect: 'read', version: 'contract:bbbb', compatibleWith: ['contract:aaaa'] },
        refund_order: { effect: 'write', version: '2.1.0', compatibleWith: ['1.9.0', '2.0.0'] },
      },
      [],
    ],
    [
      'a version that stands in for other ones only',
      {
        get_order: { effect: 'read', version: 'contract:aaaa' },
        refund_order: { effect: 'write', version: '2.1.0', compatibleWith: ['1.9.0'] },
      },
      [{ tool: 'refund_order', problem: 'version', task: '2.0.0', here: '2.1.0' }],
    ],
    [
      'a version that cannot be computed here',
      { get_order: { effect: 'read' }, refund_order: { effect: 'write', version: '2.0.0' } },
      [{ tool: 'get_order', problem: 'version', task: 'contract:aaaa', here: null }],
    ],
  ] as const)('with %s', (_case, tools, expected) => {
    expect(catalogDifferences(recorded, installed(tools as never))).toEqual(expected);
  });

  it('judges a tool the task recorded no version of by its effect alone (tasks started before versions)', () => {
    const old: Catalog = { get_order: { effect: 'read', sameKeyRetrySafe: false } };
    expect(catalogDifferences(old, installed({ get_order: { effect: 'read', version: '9' } }))).toEqual([]);
    expect(catalogDifferences(old, installed({ get_order: { effect: 'write', version: '9' } }))).toEqual([
      { tool: 'get_order', problem: 'effect', task: 'read', here: 'write' },
    ]);
  });
});

describe('defineTool: compatibleWith', () => {
  const base = () => ({ ...slowRead().tool('x') });

  it('takes a list of earlier versions', () => {
    expect(
      defineTool({ ...base(), version: '2', compatibleWith: ['1', 'contract:0123456789abcdef'] }).compatibleWith,
    ).toEqual(['1', 'contract:0123456789abcdef']);
  });

  it.each([
    ['not a list', 'v1', /compatibleWith must be a list of versions/],
    ['an empty version', [''], /compatibleWith must be a list of versions/],
    ['a version too long', ['x'.repeat(129)], /compatibleWith must be a list of versions/],
    ['a version twice', ['1', '1'], /lists a version twice/],
    ["the tool's own version", ['2'], /lists the tool's own version "2"/],
  ])('refuses %s', (_case, compatibleWith, message) => {
    const attempt = () => defineTool({ ...base(), version: '2', compatibleWith: compatibleWith as never });
    expect(attempt).toThrow(ToolDefinitionError);
    expect(attempt).toThrow(message);
  });
});

/** A logger that keeps its warn lines. */
function recordingLogger(): Logger & { warnings: { fields: Record<string, unknown>; message?: string }[] } {
  const warnings: { fields: Record<string, unknown>; message?: string }[] = [];
  return {
    warnings,
    warn: (fields, message) => warnings.push({ fields: fields as Record<string, unknown>, message }),
    error() {},
  };
}

function processWith(
  store: MemoryStore,
  tools: Tool[],
  options: { model?: AgentModel; logger?: Logger; lease?: { ttlMs: number; renewEveryMs?: number } } = {},
): Orchestrator {
  return createOrchestrator({
    tools,
    model: options.model ?? readThenWrite(),
    store,
    lease: { acquireTimeoutMs: 50, ...(options.lease ?? { ttlMs: 10_000 }) },
    expirySweepMs: 0,
    logger: options.logger,
  });
}

/** The note writer with another description: another contract, so another default version. */
function reworded(notes: ReturnType<typeof noteWriter>, compatibleWith?: string[]): Tool {
  return defineTool({
    ...notes.tool,
    description: 'records a note, reworded',
    ...(compatibleWith ? { compatibleWith } : {}),
  });
}

describe('a task is driven only by a process with its tools', () => {
  describe('when an API call would drive it here', () => {
    async function waitingTask() {
      const store = new MemoryStore();
      const read = slowRead({ ms: 1 });
      const notes = noteWriter();
      const model = readThenWrite((note) => reply.ask(`${note}; anything else?`));
      const a = processWith(store, [read.tool('A'), notes.tool], { model });
      await a.start({ principal: E17, goal: 'read, note, then ask', taskId: 't' });
      const waiting = await a.settled('t');
      expect(waiting.state).toBe('waiting_for_user');
      return { store, read, notes, a };
    }

    it('answers CatalogMismatchError naming the missing tool, changes nothing, holds nothing, and logs one warning per refusal', async () => {
      const { store, read, a } = await waitingTask();
      const logger = recordingLogger();
      const b = processWith(store, [read.tool('B')], { logger });
      const before = (await store.load('t'))!.revision;
      for (const call of [
        () => b.answer('t', E17, 'no, thanks'),
        () => b.resume('t'),
        () => b.cancel('t', E17, 'stop'),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CatalogMismatchError);
        expect(error).toMatchObject({
          code: 'catalog_mismatch',
          taskId: 't',
          differences: [
            { tool: 'record_note', problem: 'missing', task: expect.stringMatching(/^contract:/), here: null },
          ],
        });
        expect((error as Error).message).toContain('record_note is not installed');
      }
      expect((await store.load('t'))!.revision).toBe(before);
      expect(b.inFlight()).toEqual({ live: 0, leases: 0 });
      expect(await leaseIsFree(store, 't')).toBe(true);
      expect(logger.warnings).toHaveLength(3);
      expect(logger.warnings[0]).toMatchObject({
        fields: { taskId: 't', code: 'catalog_mismatch', tools: ['record_note: missing'] },
      });
      // The process with the tools still drives it.
      expect(await a.answer('t', E17, 'no, thanks')).toMatchObject({ accepted: true });
      await a.close();
      await b.close();
    });

    it('refuses a tool whose contract changed, and takes it once the new version declares it stands in for the old one', async () => {
      const { store, read, notes, a } = await waitingTask();
      const recordedVersion = (await store.load('t'))!.snapshot.context.catalog.record_note!.version!;
      const changed = processWith(store, [read.tool('B'), reworded(notes)]);
      const error = await changed.answer('t', E17, 'no').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CatalogMismatchError);
      expect((error as CatalogMismatchError).differences).toEqual([
        { tool: 'record_note', problem: 'version', task: recordedVersion, here: expect.stringMatching(/^contract:/) },
      ]);
      await changed.close();

      const upgraded = processWith(store, [read.tool('B'), reworded(notes, [recordedVersion])]);
      expect(await upgraded.answer('t', E17, 'no, thanks')).toMatchObject({ accepted: true });
      await a.close();
      await upgraded.close();
    });

    it('still reads and refuses events for a finished task it could not drive', async () => {
      const store = new MemoryStore();
      const read = slowRead({ ms: 1 });
      const notes = noteWriter();
      const a = processWith(store, [read.tool('A'), notes.tool]);
      await a.start({ principal: E17, goal: 'read, then note', taskId: 'done-1' });
      expect((await a.settled('done-1')).state).toBe('answered');
      const b = processWith(store, [read.tool('B')]);
      expect((await b.status('done-1')).state).toBe('answered');
      expect(await b.cancel('done-1', E17)).toMatchObject({ accepted: false, code: 'task_finished' });
      await a.close();
      await b.close();
    });
  });

  describe('when a process that died left it running', () => {
    it('is reported as catalog_mismatch by recovery here, not resumed, and recovered by a process with its tools', async () => {
      const { store, advance } = clockedStore();
      const dead = slowRead('gate'); // never released: the process running it is gone
      const notes = noteWriter();
      const a = processWith(store, [dead.tool('A'), notes.tool], {
        lease: { ttlMs: 10_000, renewEveryMs: 3_600_000 },
      });
      await a.start({ principal: E17, goal: 'read, then note', taskId: 'orphan' });
      await until(() => dead.started.length === 1);
      advance(10_001); // its lease expires (the store's clock moves past its TTL)

      const logger = recordingLogger();
      const quick = slowRead({ ms: 1 });
      const b = processWith(store, [quick.tool('B')], { logger });
      const report = await b.recover();
      expect(report).toMatchObject({
        resumed: [],
        busy: [],
        quarantined: [],
        catalogMismatch: [{ taskId: 'orphan', reason: expect.stringContaining('record_note is not installed') }],
      });
      expect(b.inFlight()).toEqual({ live: 0, leases: 0 });
      expect(quick.started).toEqual([]);
      expect(logger.warnings).toHaveLength(1);
      // Nothing was recorded on it: a process with the tools recovers it.
      expect(await store.quarantined('orphan')).toBeNull();
      const c = processWith(store, [quick.tool('C'), notes.tool]);
      expect((await c.recover()).resumed).toEqual(['orphan']);
      const done = await c.settled('orphan');
      expect(done).toMatchObject({ state: 'answered', outcome: { answer: 'read by C' } });
      expect(quick.started).toEqual(['C']);
      await a.close();
      await b.close();
      await c.close();
    });
  });

  it('drives a task started in another process with the same tools (defined separately)', async () => {
    const store = new MemoryStore();
    const notes = noteWriter();
    const model = scriptedModel([
      reply.ask('which note?'),
      () => reply.call('record_note', { text: 'x' }),
      reply.answer('noted'),
    ]);
    const a = processWith(store, [slowRead().tool('A'), notes.tool], { model });
    await a.start({ principal: E17, goal: 'note', taskId: 'same' });
    expect((await a.settled('same')).state).toBe('waiting_for_user');
    await a.close();
    const b = processWith(store, [slowRead().tool('B'), noteWriter().tool], { model });
    expect(await b.answer('same', E17, 'x')).toMatchObject({ accepted: true });
    expect((await b.settled('same')).state).toBe('answered');
    await b.close();
  });
});
