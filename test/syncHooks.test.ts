/**
 * Hooks declared synchronous (`hooks: 'sync'`): the gate's guard asks `validate` and `authorize` itself, in the step
 * that judges the call (no `vetting.validating` / `vetting.authorizing`, no `check_started`), with the same verdicts
 * and refusal codes as the invoked states. A hook that throws, or answers with a promise after all, refuses the call.
 */
import type { InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { reply } from '../src/testing/scriptedModel.js';
import { type ValidationResult, defineTool } from '../src/tool.js';
import { ToolDefinitionError } from '../src/errors.js';
import { E17, byKind, harness } from './support/harness.js';

interface Hooks {
  validate?: (args: { n: number }) => ValidationResult;
  authorize?: (args: { n: number }) => ValidationResult;
}

function probe(hooks: Hooks, declared: 'sync' | 'async' = 'sync') {
  return defineTool({
    name: 'probe',
    description: 'reads one number',
    effect: 'read',
    scopes: ['rooms:read'],
    timeoutMs: 1_000,
    hooks: declared,
    input: z.strictObject({ n: z.number().int() }),
    output: z.strictObject({ n: z.number().int() }),
    ...hooks,
    execute: async ({ n }) => ({ ok: true, value: { n } }),
  });
}

async function run(hooks: Hooks, declared: 'sync' | 'async' = 'sync') {
  const values = new Set<string>();
  const inspect = (event: InspectionEvent) => {
    if (event.type === '@xstate.snapshot') values.add(JSON.stringify((event.snapshot as { value?: unknown }).value));
  };
  const { orchestrator } = harness({
    script: [reply.call('probe', { n: 7 }), reply.answer('done')],
    extraTools: [probe(hooks, declared)],
    inspect,
  });
  const status = await orchestrator.run({ principal: E17, goal: 'read a number' });
  const audit = await orchestrator.audit(status.taskId);
  const transcript = await orchestrator.transcript(status.taskId);
  const observation = transcript.flatMap((e) => (e.kind === 'result' ? [e.observation] : []))[0]!;
  await orchestrator.close();
  const gates = byKind(audit, 'gate')
    .filter((g) => g.tool === 'probe')
    .map((g) => `${g.gate}:${g.decision}${g.code ? `:${g.code}` : ''}`);
  return { observation, audit, gates, values: [...values] };
}

describe("hooks: 'sync'", () => {
  it('asks both hooks in the judging step, once each: no invoked state, no check_started, the call runs', async () => {
    const asked: string[] = [];
    const { observation, audit, gates, values } = await run({
      validate: ({ n }) => (asked.push(`validate ${n}`), { ok: true }),
      authorize: ({ n }) => (asked.push(`authorize ${n}`), { ok: true }),
    });
    expect(observation).toMatchObject({ ok: true, data: { n: 7 } });
    expect(asked).toEqual(['validate 7', 'authorize 7']);
    expect(gates).toEqual(['schema:pass', 'mandate:pass', 'business:pass', 'permission:pass']);
    expect(byKind(audit, 'check_started')).toEqual([]);
    expect(values.some((v) => /validating|authorizing/.test(v))).toBe(false);
  });

  it("refuses with the hook's own code: business validation, then resource permission", async () => {
    const business = await run({ validate: () => ({ ok: false, code: 'too_big', summary: 'n is too big' }) });
    expect(business.observation).toMatchObject({ ok: false, code: 'too_big', gate: 'business' });
    expect(business.gates).toEqual(['schema:pass', 'mandate:pass', 'business:reject:too_big']);

    const permission = await run({ authorize: () => ({ ok: false, summary: 'not this number' }) });
    expect(permission.observation).toMatchObject({ ok: false, code: 'permission_denied', gate: 'permission' });
    expect(permission.gates).toEqual([
      'schema:pass',
      'mandate:pass',
      'business:pass',
      'permission:reject:permission_denied',
    ]);
  });

  it('refuses the call (unavailable) when a hook throws or returns a promise after all', async () => {
    const thrown = await run({
      validate: () => {
        throw new Error('db at 10.0.0.7 is down');
      },
    });
    expect(thrown.observation).toMatchObject({ ok: false, code: 'unavailable', gate: 'business' });
    expect(JSON.stringify(thrown.observation)).not.toContain('10.0.0.7');

    const promised = await run({
      authorize: (() => Promise.resolve({ ok: true })) as unknown as Hooks['authorize'],
    });
    expect(promised.observation).toMatchObject({ ok: false, code: 'unavailable', gate: 'permission' });
  });

  it('keeps the default: without the flag, the same hooks run in their invoked states', async () => {
    const { observation, audit, values } = await run(
      { validate: () => ({ ok: true }), authorize: () => ({ ok: true }) },
      'async',
    );
    expect(observation).toMatchObject({ ok: true });
    expect(byKind(audit, 'check_started').map((e) => e.gate)).toEqual(['business', 'permission']);
    expect(values).toEqual(expect.arrayContaining(['{"vetting":"validating"}', '{"vetting":"authorizing"}']));
  });

  it('refuses a definition that declares sync hooks but gives an async function', () => {
    expect(() =>
      defineTool({
        ...probe({}),
        validate: async () => ({ ok: true }),
      }),
    ).toThrow(ToolDefinitionError);
    expect(() => defineTool({ ...probe({}), hooks: 'later' as never })).toThrow(/hooks must be 'sync' or 'async'/);
  });
});

describe('what a hook is handed is a copy (sync and async alike)', () => {
  const declared = ['sync', 'async'] as const;

  for (const hooks of declared) {
    it(`${hooks} hooks: one that changes its arguments changes neither what runs nor the judged call`, async () => {
      const ran: unknown[] = [];
      const tool = defineTool({
        name: 'probe',
        description: 'reads one number with free-form metadata',
        effect: 'read',
        scopes: ['rooms:read'],
        timeoutMs: 1_000,
        hooks,
        input: z.strictObject({ n: z.number().int(), meta: z.unknown() }),
        output: z.strictObject({ n: z.number().int() }),
        validate: (args: { meta: unknown }) => {
          (args.meta as { limit: number }).limit = 999;
          return { ok: true };
        },
        execute: async (args: { n: number; meta: unknown }) => {
          ran.push(structuredClone(args));
          return { ok: true, value: { n: args.n } };
        },
      });
      const { orchestrator } = harness({
        script: [reply.call('probe', { n: 7, meta: { limit: 1 } }), reply.answer('done')],
        extraTools: [tool],
      });
      const status = await orchestrator.run({ principal: E17, goal: 'read a number' });
      await orchestrator.close();
      expect(status.state).toBe('answered');
      expect(ran).toEqual([{ n: 7, meta: { limit: 1 } }]);
    });
  }
});

describe('the principal a hook is handed is a copy', () => {
  for (const hooks of ['sync', 'async'] as const) {
    it(`${hooks} hooks: one that adds a scope to its principal does not pass the scope gate`, async () => {
      const tool = defineTool({
        name: 'probe',
        description: 'reads one number, for administrators',
        effect: 'read',
        scopes: ['rooms:read', 'probe:admin'],
        timeoutMs: 1_000,
        hooks,
        input: z.strictObject({ n: z.number().int() }),
        output: z.strictObject({ n: z.number().int() }),
        validate: (_args: { n: number }, ctx: { principal: { scopes: string[] } }) => {
          ctx.principal.scopes.push('probe:admin');
          return { ok: true };
        },
        execute: async ({ n }: { n: number }) => ({ ok: true, value: { n } }),
      });
      const { orchestrator } = harness({
        script: [reply.call('probe', { n: 7 }), reply.answer('done')],
        extraTools: [tool],
      });
      const status = await orchestrator.run({ principal: { ...E17, scopes: [...E17.scopes] }, goal: 'read' });
      const transcript = await orchestrator.transcript(status.taskId);
      await orchestrator.close();
      const observation = transcript.flatMap((e) => (e.kind === 'result' ? [e.observation] : []))[0];
      expect(observation).toMatchObject({ ok: false, code: 'permission_denied', gate: 'permission' });
    });
  }
});

describe('a batch: the invoked hook of one call never answers for the next', () => {
  const reader = (name: string, hooks: 'sync' | 'async', rules: Hooks) =>
    defineTool({
      name,
      description: `reads one number (${name})`,
      effect: 'read',
      scopes: ['rooms:read'],
      timeoutMs: 1_000,
      hooks,
      input: z.strictObject({ n: z.number().int() }),
      output: z.strictObject({ n: z.number().int() }),
      ...rules,
      execute: async ({ n }) => ({ ok: true, value: { n } }),
    });

  async function batch(first: ReturnType<typeof reader>, second: ReturnType<typeof reader>) {
    const { orchestrator } = harness({
      script: [
        reply.calls({ name: 'first', args: { n: 1 } }, { name: 'second', args: { n: 2 } }),
        reply.answer('done'),
      ],
      extraTools: [first, second],
    });
    const status = await orchestrator.run({ principal: E17, goal: 'read two numbers' });
    const transcript = await orchestrator.transcript(status.taskId);
    await orchestrator.close();
    return transcript.flatMap((e) => (e.kind === 'result' ? [e.observation] : []));
  }

  const no = (code: string): ValidationResult => ({ ok: false, code, summary: `${code} said no` });

  it("asks the next call's synchronous hook after an asynchronous one passed the call before it", async () => {
    for (const hook of ['validate', 'authorize'] as const) {
      const [first, second] = await batch(
        reader('first', 'async', { [hook]: () => ({ ok: true }) }),
        reader('second', 'sync', { [hook]: () => no('second_no') }),
      );
      expect(first).toMatchObject({ ok: true });
      expect(second).toMatchObject({ ok: false, gate: hook === 'validate' ? 'business' : 'permission' });
      expect(second).toMatchObject({ summary: 'second_no said no' });
    }
  });

  it('does not refuse the next call for the reason the call before it was refused', async () => {
    for (const hook of ['validate', 'authorize'] as const) {
      const [first, second] = await batch(
        reader('first', 'async', { [hook]: () => no('first_no') }),
        reader('second', 'sync', {}),
      );
      expect(first).toMatchObject({ ok: false, summary: 'first_no said no' });
      expect(second).toMatchObject({ ok: true, data: { n: 2 } });
    }
  });
});
