/**
 * Sealed values inside a running task, at the edges privacy.test.ts's end-to-end runs do not reach: a result that
 * quotes an opened value, arguments that do not parse, names in a proposal, tokens of another task or another
 * orchestrator, the confirmation's label, a long goal, a host failure code. What the task keeps (store, audit,
 * transcript) is searched for the raw values; the Privacy class alone is privacy.test.ts's.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../machines/context.js';
import { cardNumbers } from '../src/privacy/redactors.js';
import { keyedSealer } from '../src/privacy/sealer.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply } from '../src/testing/scriptedModel.js';
import { type Tool, defineTool } from '../src/tool.js';
import { harness } from './support/harness.js';
import { CardService, PAYER, WALLET_CARD, secretsIn, storedText, walletTools } from './support/walletWorld.js';

const KEY = randomBytes(32);
// No redactor finds it (no known prefix, no key name beside it): only the echo of the opened value seals it.
const SECRET_KEY = 'qz9f8e7d6c5b4a39281706';
const privacyOptions = () => ({ sealer: keyedSealer({ key: KEY }), redactors: [cardNumbers()] });

/** A key-issuing read and a check that echoes the key it was given in a successful result, as many APIs do. */
function keyTools(): Tool[] {
  return [
    defineTool({
      name: 'issue_key',
      description: 'Issues an API key.',
      effect: 'read',
      scopes: [],
      timeoutMs: 200,
      input: z.strictObject({}),
      output: z.strictObject({ api_key: z.string() }),
      sensitive: { output: ['api_key'] },
      execute: async () => ({ ok: true, value: { api_key: SECRET_KEY } }),
    }),
    defineTool({
      name: 'check_key',
      description: 'Checks an API key.',
      effect: 'read',
      scopes: [],
      timeoutMs: 200,
      input: z.strictObject({ api_key: z.string() }),
      output: z.strictObject({ valid: z.boolean(), message: z.string() }),
      sensitive: { args: ['api_key'] },
      execute: async (args) => ({ ok: true, value: { valid: true, message: `key ${args.api_key} is valid` } }),
    }),
  ];
}

async function everything(h: ReturnType<typeof harness>, taskId: string): Promise<string> {
  return [
    await storedText(h.store),
    JSON.stringify(await h.orchestrator.audit(taskId)),
    JSON.stringify(await h.orchestrator.transcript(taskId)),
  ].join('\n');
}

describe('values a call opened', () => {
  it('are sealed again where a successful result quotes them (a key with no pattern a redactor could find)', async () => {
    const h = harness({
      extraTools: keyTools(),
      privacy: privacyOptions(),
      script: [
        reply.call('issue_key', {}),
        (view) => reply.call('check_key', { api_key: view.data<{ api_key: string }>('issue_key')!.api_key }),
        reply.answer('ok'),
      ],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'check my key', taskId: 'echo' });
    expect(status.outcome?.status).toBe('answered');
    const kept = await everything(h, 'echo');
    expect(kept).toContain('is valid');
    expect(kept).not.toContain(SECRET_KEY);
  });
});

describe('arguments that do not parse cleanly', () => {
  it.each([
    ['duplicate keys', `{"card_number":"${WALLET_CARD}","card_number":null,"amount":5}`],
    ['not JSON', `{"card_number":"${WALLET_CARD}",}`],
    ['JSON in a string', JSON.stringify(JSON.stringify({ card_number: WALLET_CARD, amount: 5 }))],
  ])('are withheld whole when the tool takes sensitive arguments (%s)', async (_name, args) => {
    const h = harness({
      extraTools: walletTools(new CardService()),
      privacy: { sealer: keyedSealer({ key: KEY }) }, // no redactor: only the tool's declaration protects it
      script: [
        { type: 'tool_calls', calls: [{ callId: 'c1', name: 'charge_card', arguments: args }] },
        reply.answer('gave up'),
      ],
    });
    await h.orchestrator.run({ principal: PAYER, goal: 'charge', taskId: 'bad-args' });
    expect(secretsIn(await everything(h, 'bad-args'))).toEqual([]);
  });

  it('an unusable output naming a sensitive field is kept sealed whole', async () => {
    const received = JSON.stringify({
      tool_calls: [{ function: { name: 'charge_card', arguments: `{"card_number":"${WALLET_CARD}"` } }],
    });
    const h = harness({
      extraTools: walletTools(new CardService()),
      privacy: { sealer: keyedSealer({ key: KEY }) },
      script: [{ type: 'invalid', detail: 'cut off', received }, reply.answer('ok')],
    });
    await h.orchestrator.run({ principal: PAYER, goal: 'charge', taskId: 'cut' });
    const kept = await everything(h, 'cut');
    expect(kept).toMatch(/"received":"\[\[sealed:received:/);
    expect(secretsIn(kept)).toEqual([]);
  });
});

describe('tool names and call ids', () => {
  it('in a proposal are redacted before the protocol gate quotes them', async () => {
    const h = harness({
      privacy: privacyOptions(),
      script: [
        { type: 'tool_calls', calls: [{ callId: `id-${WALLET_CARD}`, name: `pay_${WALLET_CARD}`, arguments: '{}' }] },
        reply.answer('ok'),
      ],
    });
    await h.orchestrator.run({ principal: PAYER, goal: 'pay', taskId: 'names' });
    expect(secretsIn(await everything(h, 'names'))).toEqual([]);
  });
});

describe('two orchestrators in one process', () => {
  it('sharing tool objects each open their own tasks’ values', async () => {
    const tools = walletTools(new CardService());
    const script = () => [
      reply.call('get_wallet', { wallet_id: 'W1' }),
      (view: { data<T>(tool: string): T | undefined }) =>
        reply.call('charge_card', {
          card_number: view.data<{ card_number: string }>('get_wallet')!.card_number,
          amount: 100,
        }),
    ];
    for (const name of ['first', 'second']) {
      const h = harness({ extraTools: tools, privacy: privacyOptions(), script: script() as never });
      const status = await h.orchestrator.run({ principal: PAYER, goal: 'charge my wallet card', taskId: name });
      expect(status.state, name).toBe('waiting_for_confirmation');
      await h.orchestrator.close();
    }
  });
});

describe('the confirmation of a sealed value', () => {
  it('shows the label the value came with (the card’s last four digits)', async () => {
    const h = harness({
      extraTools: walletTools(new CardService()),
      privacy: privacyOptions(),
      script: [
        (view) => reply.call('charge_card', { card_number: view.goal.match(/\[\[sealed:[^\]]+\]\]/)![0], amount: 100 }),
      ],
    });
    const status = await h.orchestrator.run({
      principal: PAYER,
      goal: `Charge 1.00 to ${WALLET_CARD}`,
      taskId: 'label',
    });
    expect(status.state).toBe('waiting_for_confirmation');
    expect(status.pendingConfirmation?.summary).toMatch(/^Charge 1\.00 to \[\[sealed:card-1111:/);
  });
});

describe('a token of an earlier task under the same id', () => {
  it('opens nothing: the id in another tenant (after the tombstone went) is another task', async () => {
    const service = new CardService();
    const store = new MemoryStore();
    const first = harness({
      store,
      extraTools: walletTools(service),
      privacy: privacyOptions(),
      script: [reply.call('get_wallet', { wallet_id: 'W1' }), reply.answer('read')],
    });
    await first.orchestrator.run({ principal: PAYER, goal: 'read my wallet', taskId: 'order-1' });
    const token = JSON.stringify(await first.orchestrator.transcript('order-1')).match(
      /\[\[sealed:card_number:[A-Za-z0-9_-]+\]\]/,
    )![0];
    const evil: Principal = { userId: 'mallory', tenantId: 'evil', scopes: PAYER.scopes };
    const second = harness({
      store: new MemoryStore(),
      extraTools: walletTools(service),
      privacy: privacyOptions(),
      script: [reply.call('charge_card', { card_number: token, amount: 500 }), reply.answer('tried')],
    });
    const status = await second.orchestrator.run({ principal: evil, goal: 'charge', taskId: 'order-1' });
    expect(status.state).toBe('answered');
    expect(service.charges.size).toBe(0);
    // Not this task's token: it is text like any other (sealed as such), and no card number.
    const refused = (await second.orchestrator.audit('order-1')).find(
      (e) => e.kind === 'gate' && e.decision === 'reject',
    );
    expect(refused).toMatchObject({ gate: 'schema', summary: 'card_number: invalid value (a sensitive field)' });
  });
});

describe('a long goal', () => {
  it('within the limit stays accepted when sealing makes it longer', async () => {
    const h = harness({ privacy: privacyOptions(), script: [reply.answer('ok')] });
    const goal = `${'a '.repeat(7_000)}${`${WALLET_CARD} `.repeat(100)}`.slice(0, 16_000);
    const status = await h.orchestrator.run({ principal: PAYER, goal, taskId: 'long-goal' });
    expect(status.state).toBe('answered');
    expect(secretsIn(status.goal)).toEqual([]);
  });
});

describe('a host failure code that quotes a value', () => {
  it('is replaced by a redacted code', async () => {
    const tools = walletTools(new CardService());
    const charge = tools[1]!;
    Object.assign(charge, {
      validate: (args: { card_number: string }) => ({ ok: false, code: `bad_${args.card_number}`, summary: 'no' }),
    });
    const h = harness({
      extraTools: tools,
      privacy: { sealer: keyedSealer({ key: KEY }) },
      script: [
        reply.call('get_wallet', { wallet_id: 'W1' }),
        (view) =>
          reply.call('charge_card', {
            card_number: view.data<{ card_number: string }>('get_wallet')!.card_number,
            amount: 100,
          }),
        reply.answer('no'),
      ],
    });
    await h.orchestrator.run({ principal: PAYER, goal: 'charge', taskId: 'code' });
    const kept = await everything(h, 'code');
    expect(kept).toContain('redacted_code');
    expect(secretsIn(kept)).toEqual([]);
  });
});
