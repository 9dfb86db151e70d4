/**
 * Sensitive values never reach what a task persists or streams, while the tool that needs one still receives it:
 * a task that meets card numbers at every entry (the goal, a read's result, the model's output, a hook's refusal)
 * is run on the memory and file stores, and every stored byte and every stream is searched for them.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { Privacy, displayText } from '../src/privacy/privacy.js';
import { cardNumbers, emailAddresses, ibans } from '../src/privacy/redactors.js';
import { keyedSealer, memorySealer } from '../src/privacy/sealer.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { GOAL_CARD, WALLET_CARD, runWalletTask, secretsIn, storedText } from './support/walletWorld.js';

const KEY = randomBytes(32);
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

async function fileStore(): Promise<{ store: TaskStore; where: string }> {
  const where = await mkdtemp(join(tmpdir(), 'privacy-'));
  dirs.push(where);
  return { store: new FileStore(where), where };
}

const STORES: [string, () => Promise<{ store: TaskStore; where?: string }>][] = [
  ['memory', async () => ({ store: new MemoryStore() })],
  ['file', fileStore],
];

describe.each(STORES)('a task carrying card numbers, on the %s store', (_name, open) => {
  it.each([
    ['a memory sealer', () => memorySealer()],
    ['a keyed sealer', () => keyedSealer({ key: KEY })],
  ])('with %s: the charge gets the real card, and no stored byte or stream holds one', async (_sealer, sealer) => {
    const { store, where } = await open();
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const { service, streams, final } = await runWalletTask({
      store,
      taskId: 'wallet-1',
      privacy: { sealer: sealer(), redactors: [cardNumbers()] },
      tracer: provider.getTracer('privacy-test'),
    });

    // The tool that needs the value got it; the task succeeded on the tool's own result.
    expect([...service.charges.values()]).toEqual([{ card: WALLET_CARD, amount: 500 }]);
    expect(final.outcome?.answer).toMatch(/^Charged 5\.00 to card \[\[sealed:card-1111:[A-Za-z0-9_-]+\]\]\.$/);
    expect(final.outcome?.status).toBe('answered');

    // Every secret took the paths it should have (so the scan below looks at something).
    const streamed = streams.chunks.join('\n');
    expect(streamed).toContain('[[sealed:card-4444:'); // the goal's card
    expect(streamed).toContain('[[sealed:card_number:'); // the read's sensitive field, copied into the write
    expect(streamed).toContain('card_refused'); // the hook that quoted the card it refused
    expect(streamed).toMatch(/"received":"\{\\"card\\": \\"\[\[sealed:card-1111:/); // the unusable output, kept

    const spans = JSON.stringify(
      exporter
        .getFinishedSpans()
        .map((span) => ({ name: span.name, attributes: span.attributes, events: span.events, status: span.status })),
    );
    expect(spans).toContain('execute_tool charge_card');
    await provider.shutdown();

    expect(secretsIn(await storedText(store, where))).toEqual([]);
    expect(secretsIn(streamed)).toEqual([]);
    expect(secretsIn(spans)).toEqual([]);
  });
});

describe('sealed values across a restart', () => {
  it('a keyed sealer opens them in the new process: the confirmed charge gets the real card', async () => {
    const { store, where } = await fileStore();
    const privacy = { sealer: keyedSealer({ key: KEY }), redactors: [cardNumbers()] };
    const run = await runWalletTask({
      store,
      taskId: 'wallet-k',
      privacy,
      restart: { sealer: keyedSealer({ key: KEY }), redactors: [cardNumbers()] },
    });
    expect([...run.service.charges.values()]).toEqual([{ card: WALLET_CARD, amount: 500 }]);
    expect(run.final.outcome?.status).toBe('answered');
    expect(secretsIn(await storedText(store, where))).toEqual([]);
  });

  it('a memory sealer cannot: the write is not sent, and the model is told why', async () => {
    const store = new MemoryStore();
    const run = await runWalletTask({
      store,
      taskId: 'wallet-m',
      privacy: { redactors: [cardNumbers()] },
      restart: { redactors: [cardNumbers()] },
    });
    expect(run.service.charges.size).toBe(0);
    // The check right before the write (the schema gate again) finds the value gone: nothing is sent.
    const audit = await storedText(store);
    expect(audit).toMatch(/the sealed value at card_number \(card_number\) is not available/);
    expect(secretsIn(audit)).toEqual([]);
  });
});

describe('Privacy', () => {
  const privacy = new Privacy({
    sealer: keyedSealer({ key: KEY }),
    redactors: [cardNumbers(), emailAddresses(), ibans()],
  });
  const t1 = { taskId: 't1', tenantId: 'acme', startedAt: 1 };
  const t2 = { taskId: 't2', tenantId: 'acme', startedAt: 1 };
  const cardsOnly = new Privacy({ sealer: keyedSealer({ key: KEY }), redactors: [cardNumbers()] });

  it('seals redactor matches in text, deterministically within a task, and leaves other numbers alone', () => {
    const text = `card ${GOAL_CARD}, order 1234567890123 and mail ada@example.com, IBAN DE89 3704 0044 0532 0130 00`;
    const sealed = privacy.text(t1, text);
    expect(secretsIn(sealed)).toEqual([]);
    expect(sealed).toContain('order 1234567890123'); // fails the Luhn check: not a card
    expect(sealed).not.toContain('ada@example.com');
    expect(sealed).not.toContain('3704 0044');
    expect(privacy.text(t1, text)).toBe(sealed);
    expect(privacy.text(t2, text)).not.toBe(sealed);
    // Sealing what is sealed changes nothing.
    expect(privacy.text(t1, sealed)).toBe(sealed);
    expect(displayText(sealed)).toBe('card ‹card-4444›, order 1234567890123 and mail ‹email›, IBAN ‹iban-3000›');
  });

  it('seals fields at sensitive paths whole, and opens them only for the task that sealed them', () => {
    // Plain values with a space: a sealed token (base64url) can never contain them by chance, as it could "x1".
    const value = {
      card: { number: 4111111111111111, holder: 'Ada' },
      items: [{ iban: 'iban one' }, { iban: 'iban two' }],
    };
    const sealed = privacy.json(t1, value, ['card.number', 'items.*.iban']);
    expect(sealed.card.holder).toBe('Ada');
    expect(String(sealed.card.number)).toMatch(/^\[\[sealed:number:[A-Za-z0-9_-]+\]\]$/);
    expect(JSON.stringify(sealed)).not.toContain('iban one');
    expect(JSON.stringify(sealed)).not.toContain('iban two');
    expect(JSON.stringify(sealed)).toContain('[[sealed:iban:'); // labelled by the declared path, not by the data
    const opened = privacy.open(sealed, ['card.number', 'items.*.iban'], t1);
    expect(opened).toMatchObject({ ok: true, value });
    expect(privacy.open(sealed, ['card.number'], t2)).toMatchObject({
      ok: false,
      failure: { path: 'card.number', reason: 'other_task' },
    });
    // The same id in another tenant, or started at another time, is another task.
    expect(privacy.open(sealed, ['card.number'], { ...t1, tenantId: 'evil' })).toMatchObject({
      ok: false,
      failure: { reason: 'other_task' },
    });
    expect(privacy.open(sealed, ['card.number'], { ...t1, startedAt: 2 })).toMatchObject({
      ok: false,
      failure: { reason: 'other_task' },
    });
    // Unchanged input comes back as the same object (callers keep the original bytes).
    const plain = { note: 'nothing here' };
    expect(privacy.json(t1, plain, [])).toBe(plain);
  });

  it('refuses forged and altered blobs, and a sealer with a key of the wrong size', () => {
    const sealer = keyedSealer({ key: KEY });
    const blob = sealer.seal('t1', '"4111111111111111"');
    expect(sealer.open(blob)).toEqual({ owner: 't1', plaintext: '"4111111111111111"' });
    const altered = blob.slice(0, -2) + (blob.endsWith('AA') ? 'AB' : 'AA');
    expect(sealer.open(altered)).toBeUndefined();
    expect(keyedSealer({ key: randomBytes(32) }).open(blob)).toBeUndefined();
    expect(memorySealer().open(blob)).toBeUndefined();
    expect(() => keyedSealer({ key: randomBytes(16) })).toThrow(/32-byte key/);
  });

  it('seals the values a hook quotes from the call it was given', () => {
    const sealed = privacy.json(t1, { card: '4000-0000' }, ['card']);
    const opened = privacy.open(sealed, ['card'], t1);
    if (!opened.ok) throw new Error('expected to open');
    expect(privacy.echoes(t1, 'card 4000-0000 is blocked', opened.opened)).toBe(`card ${sealed.card} is blocked`);
  });

  it('seals opened values in a refusal before it is cut, and finds short ones as whole words', async () => {
    const sealed = cardsOnly.json(t1, { card: WALLET_CARD, cvc: '737' }, ['card', 'cvc']);
    const opened = cardsOnly.open(sealed, ['card', 'cvc'], t1);
    if (!opened.ok) throw new Error('expected to open');
    const text = cardsOnly.echoes(
      t1,
      `${'x'.repeat(282)} card ${WALLET_CARD}, cvc=737 is wrong; order 17370 stays`,
      opened.opened,
    );
    expect(text).not.toContain('737 is');
    expect(text).toContain('order 17370 stays');
    expect(secretsIn(text)).toEqual([]);
  });

  it('redacts text that only looks sealed like any text: a token of no task of ours hides nothing', () => {
    const fake = `my card: [[sealed:card:${WALLET_CARD}]]`;
    expect(secretsIn(cardsOnly.text(t1, fake))).toEqual([]);
    expect(secretsIn(JSON.stringify(cardsOnly.json(t1, { card: `[[sealed:card:${WALLET_CARD}]]` }, ['card'])))).toEqual(
      [],
    );
  });

  it('redacts object keys and numbers too', () => {
    const sealed = JSON.stringify(cardsOnly.json(t1, { balances: { [WALLET_CARD]: 100 }, pan: 5555555555554444 }));
    expect(secretsIn(sealed)).toEqual([]);
  });

  it('round-trips a sensitive value of several KB through a keyed sealer', () => {
    const keyed = new Privacy({ sealer: keyedSealer({ key: KEY }) });
    const doc = 'd'.repeat(5_000);
    const sealed = keyed.json(t1, { doc }, ['doc']);
    expect(keyed.open(sealed, ['doc'], t1)).toMatchObject({ ok: true, value: { doc } });
  });
});
