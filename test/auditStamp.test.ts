/**
 * The audit answers "which model, which prompt, which policy, which tool version and which session made this
 * decision" on every entry, and keeps an unusable model output as it was received (cut, and redacted).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AuditEntry } from '../machines/journal.js';
import type { AgentModel, ModelReplyWithVersion, ModelRequest } from '../src/model/agentModel.js';
import { cardNumbers } from '../src/privacy/redactors.js';
import { keyedSealer } from '../src/privacy/sealer.js';
import { ScriptedModel, reply } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import { harness } from './support/harness.js';
import { CardService, PAYER, WALLET_GOAL, secretsIn, walletTools } from './support/walletWorld.js';

/** A scripted model that reports, as a provider does, the model version that answered each turn. */
function versionedModel(
  script: ConstructorParameters<typeof ScriptedModel>[0],
  extra: { version?: string; promptVersion?: string; reported?: string },
): AgentModel & { requests: unknown[] } {
  const inner = new ScriptedModel(script, { name: 'acme-llm' });
  return {
    name: inner.name,
    ...(extra.version ? { version: extra.version } : {}),
    ...(extra.promptVersion ? { promptVersion: extra.promptVersion } : {}),
    reservation: inner.reservation,
    requests: inner.requests,
    async decide(request: ModelRequest): Promise<ModelReplyWithVersion> {
      const answer = await inner.decide(request);
      return extra.reported ? { ...answer, modelVersion: extra.reported } : answer;
    },
  };
}

const lookUp = defineTool({
  name: 'look_up',
  description: 'Looks something up.',
  version: '2.1.0',
  effect: 'read',
  scopes: [],
  timeoutMs: 200,
  input: z.strictObject({ q: z.string() }),
  output: z.strictObject({ a: z.string() }),
  execute: async () => ({ ok: true, value: { a: 'x' } }),
});

describe('every audit entry', () => {
  it('names the model that answered, the prompt and policy versions, the session behind it, and each tool version', async () => {
    const model = versionedModel(
      [
        reply.call('look_up', { q: 'a' }),
        reply.call('get_wallet', { wallet_id: 'W1' }),
        (view) =>
          reply.call('charge_card', {
            card_number: view.data<{ card_number: string }>('get_wallet')!.card_number,
            amount: 100,
          }),
        reply.answer('Charged.'),
      ],
      { promptVersion: 'support-prompt@7', reported: 'acme-llm-2026-11-02' },
    );
    const h = harness({
      model,
      extraTools: [lookUp, ...walletTools(new CardService())],
      policy: { version: 'policy-v9' },
    });
    const waiting = await h.orchestrator.run({
      principal: PAYER,
      goal: 'Charge 1.00 to my wallet card.',
      taskId: 'stamped',
    });
    const pending = waiting.pendingConfirmation!;
    // Another session of the same user decides.
    await h.orchestrator.confirm(
      'stamped',
      { ...PAYER, sessionId: 'sess-phone' },
      { id: pending.id, argsHash: pending.argsHash },
    );
    await h.orchestrator.settled('stamped');
    const audit: AuditEntry[] = await h.orchestrator.audit('stamped');

    for (const entry of audit) {
      expect(entry.policy).toBe('policy-v9');
      expect(entry.prompt).toBe('support-prompt@7');
      expect(entry.model?.id).toBe('acme-llm');
    }
    // Before the first reply the version is not known; from the reply on, it is the one the provider reported.
    const firstReply = audit.findIndex((e) => e.kind === 'model_output');
    expect(audit.slice(0, firstReply).every((e) => e.model?.version === null)).toBe(true);
    expect(audit.slice(firstReply).every((e) => e.model?.version === 'acme-llm-2026-11-02')).toBe(true);

    const granted = audit.find((e) => e.kind === 'confirmation' && e.action === 'granted');
    expect(granted?.session).toBe('sess-phone');
    // Entries the confirming event caused name its session; the others the task's.
    const bySession = audit
      .filter((e) => e.session !== 'sess-1')
      .map((e) => `${e.kind}${'action' in e ? `:${e.action}` : ''}`);
    expect(bySession).toEqual(['confirmation:granted', 'check_started']); // the grant, and the re-check it started

    const toolVersions = new Map(audit.flatMap((e) => ('tool' in e && e.tool ? [[e.tool, e.toolVersion]] : [])));
    expect(toolVersions.get('look_up')).toBe('2.1.0');
    expect(toolVersions.get('charge_card')).toMatch(/^contract:[0-9a-f]{16}$/);
    expect(toolVersions.get('get_wallet')).toMatch(/^contract:[0-9a-f]{16}$/);
    expect(toolVersions.get('get_wallet')).not.toBe(toolVersions.get('charge_card'));
  });

  it('uses the version the host pinned over the one a reply reports, and a tool contract hash that follows its schema', async () => {
    const model = versionedModel([reply.answer('ok')], { version: 'pinned-1', reported: 'something-else' });
    const h = harness({ model });
    await h.orchestrator.run({ principal: PAYER, goal: 'hello', taskId: 'pinned' });
    const audit = await h.orchestrator.audit('pinned');
    expect(new Set(audit.map((e) => e.model?.version))).toEqual(new Set(['pinned-1']));
    expect(audit.every((e) => e.prompt === null)).toBe(true);

    const changed = defineTool({
      ...lookUp,
      version: undefined,
      input: z.strictObject({ q: z.string(), limit: z.number().optional() }),
    });
    const versions = (tool: typeof lookUp) => harness({ extraTools: [tool] });
    const a = versions({ ...lookUp, version: undefined });
    const b = versions(changed);
    await a.orchestrator.run({ principal: PAYER, goal: 'g', taskId: 'a' });
    await b.orchestrator.run({ principal: PAYER, goal: 'g', taskId: 'b' });
    const catalogVersion = async (h: ReturnType<typeof harness>, id: string) =>
      (await h.store.load(id))!.snapshot.context.catalog.look_up?.version;
    expect(await catalogVersion(a, 'a')).toMatch(/^contract:/);
    expect(await catalogVersion(a, 'a')).not.toBe(await catalogVersion(b, 'b'));
  });

  it('names no session for a decision whose caller named none, never the task owner’s', async () => {
    const h = harness({
      extraTools: walletTools(new CardService()),
      privacy: { sealer: keyedSealer({ key: randomBytes(32) }), redactors: [cardNumbers()] },
      script: [reply.call('charge_card', { card_number: '4111111111111111', amount: 100 }), reply.answer('no')],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'charge', taskId: 'no-session' });
    const { sessionId: _none, ...caller } = PAYER;
    await h.orchestrator.reject('no-session', caller, { id: status.pendingConfirmation!.id });
    await h.orchestrator.settled('no-session');
    const rejected = (await h.orchestrator.audit('no-session')).find(
      (e) => e.kind === 'confirmation' && e.action === 'rejected',
    );
    expect(rejected?.session).toBeNull();
  });
});

describe('an unusable model output', () => {
  it('is kept as received, cut to 4 KB and redacted, beside the reason it was refused', async () => {
    const received = `{"tool": "charge", "card": "4111111111111111", "pad": "${'x'.repeat(10_000)}"`;
    const h = harness({
      script: [{ type: 'invalid', detail: 'not JSON', received }, reply.answer('ok')],
      privacy: { redactors: [cardNumbers()] },
    });
    await h.orchestrator.run({ principal: PAYER, goal: WALLET_GOAL, taskId: 'garbled' });
    const output = (await h.orchestrator.audit('garbled')).find(
      (e) => e.kind === 'model_output' && e.output === 'model.invalidOutput',
    );
    expect(output).toMatchObject({ detail: 'not JSON' });
    const kept = (output as { received: string }).received;
    expect(kept.length).toBeLessThanOrEqual(4_096);
    expect(kept).toMatch(/^\{"tool": "charge", "card": "\[\[sealed:card-1111:/);
    expect(kept).toMatch(/more characters cut\]$/);
    expect(secretsIn(kept)).toEqual([]);
  });
});
