/**
 * A task that carries secrets everywhere they can enter: the goal names one card, a read returns another (a field
 * the tool marks sensitive), the model copies that card's token into a confirmed write (an argument the tool marks
 * sensitive), writes a card number in its unusable output and in its answer, and a business check quotes the card in
 * its refusal. Everything the task persists or streams is collected, to look for the secrets in it.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tracer } from '@opentelemetry/api';
import type { InspectionEvent } from 'xstate';
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import { defineTool } from '../../src/tool.js';
import type { Tool } from '../../src/tool.js';
import type { ScriptStep } from '../../src/testing/scriptedModel.js';
import { reply } from '../../src/testing/scriptedModel.js';
import type { Logger } from '../../src/orchestrator/hooks.js';
import { otelTracing } from '../../src/otel.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import type { TaskStore } from '../../src/store/taskStore.js';
import { type HarnessOptions, harness } from './harness.js';

/** The card the wallet holds (returned by the read, charged by the write). */
export const WALLET_CARD = '4111111111111111';
/** The card the user names in the goal, written with spaces. */
export const GOAL_CARD = '5555 5555 5555 4444';
/** A card the model makes up; the business check refuses it and quotes it. */
export const REFUSED_CARD = '4012888888881881';
/** Every form the secrets may take in bytes: none may appear anywhere. */
export const SECRET_FORMS = [WALLET_CARD, GOAL_CARD, GOAL_CARD.replace(/ /g, ''), REFUSED_CARD];

export const PAYER: Principal = {
  userId: 'U1',
  tenantId: 'acme',
  scopes: ['wallet:read', 'wallet:charge'],
  sessionId: 'sess-1',
};

export const WALLET_GOAL = `Charge 5.00 to my wallet card (my other card is ${GOAL_CARD}, do not use it).`;

/** The service behind the tools: what each charge received, by idempotency key. */
export class CardService {
  readonly charges = new Map<string, { card: string; amount: number }>();
}

export function walletTools(service: CardService): Tool[] {
  const getWallet = defineTool({
    name: 'get_wallet',
    description: 'Reads the card on file for a wallet.',
    effect: 'read',
    scopes: ['wallet:read'],
    timeoutMs: 500,
    input: z.strictObject({ wallet_id: z.string() }),
    output: z.strictObject({ card_number: z.string().regex(/^\d{16}$/), holder: z.string() }),
    sensitive: { output: ['card_number'] },
    execute: async () => ({ ok: true, value: { card_number: WALLET_CARD, holder: 'Ada' } }),
  });
  const chargeCard = defineTool({
    name: 'charge_card',
    description: 'Charges a card.',
    effect: 'write',
    scopes: ['wallet:charge'],
    timeoutMs: 500,
    confirm: 'always',
    sameKeyRetrySafe: true,
    input: z.strictObject({ card_number: z.string().regex(/^\d{16}$/), amount: z.number().int().positive() }),
    output: z.strictObject({ charge_id: z.string() }),
    sensitive: { args: ['card_number'] },
    describeConfirmation: (args) => `Charge ${(args.amount / 100).toFixed(2)} to ${args.card_number}`,
    // Needs the real number, and quotes it when it refuses (as careless hooks do).
    validate: (args) =>
      args.card_number.startsWith('4111')
        ? { ok: true }
        : { ok: false, code: 'card_refused', summary: `card ${args.card_number} is not on file` },
    execute: async (args, ctx) => {
      service.charges.set(ctx.idempotencyKey, { card: args.card_number, amount: args.amount });
      return { ok: true, value: { charge_id: `ch-${service.charges.size}` } };
    },
    lookup: async (key) =>
      service.charges.has(key) ? { found: true, value: { charge_id: 'ch-found' } } : { found: false },
  });
  return [getWallet, chargeCard];
}

/** The model's side: it never sees a card number, only tokens, and copies the wallet's token into the charge. */
export function walletScript(): ScriptStep[] {
  return [
    { type: 'invalid', detail: 'the output was not JSON', received: `{"card": "${WALLET_CARD}"` },
    reply.call('charge_card', { card_number: REFUSED_CARD, amount: 500 }),
    reply.call('get_wallet', { wallet_id: 'W1' }),
    (view) => {
      const card = view.data<{ card_number: string }>('get_wallet')?.card_number ?? view.observations.length.toString();
      return reply.call('charge_card', { card_number: card, amount: 500 });
    },
    reply.answer(`Charged 5.00 to card ${WALLET_CARD}.`),
  ];
}

/** Every stream a host can attach, collected as text. */
export function collectStreams() {
  const chunks: string[] = [];
  const push = (...values: unknown[]) => {
    for (const value of values)
      chunks.push(JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? String(v) : v)) ?? '');
  };
  const logger: Logger = {
    debug: (...args: unknown[]) => push(args),
    info: (...args: unknown[]) => push(args),
    warn: (...args: unknown[]) => push(args),
    error: (...args: unknown[]) => push(args),
  } as Logger;
  const all = (payload: unknown) => push(payload);
  return {
    chunks,
    inspect: (event: InspectionEvent) => {
      // What an inspector is sent: the event and, for snapshots, the whole context.
      const { actorRef: _actor, ...rest } = event as InspectionEvent & { actorRef?: unknown };
      const snapshot = (event as { snapshot?: { context?: unknown; value?: unknown } }).snapshot;
      push({ ...rest, snapshot: snapshot ? { value: snapshot.value, context: snapshot.context } : undefined });
    },
    logger,
    hooks: {
      transition: all,
      toolStarted: all,
      toolFinished: all,
      confirmationRequested: all,
      confirmationDecided: all,
      settled: all,
    },
    push,
  };
}

/** Which secrets (in any of their forms) occur in `text`. */
export function secretsIn(text: string): string[] {
  return SECRET_FORMS.filter((secret) => text.includes(secret));
}

/** Every byte a store holds (its rows, journals, indexes, leases and tombstones), as text. */
export async function storedText(store: TaskStore, where?: string): Promise<string> {
  if (store instanceof MemoryStore) {
    // Its private maps, serialized as they are kept.
    return JSON.stringify(Object.values(store as unknown as Record<string, unknown>), (_key, value) =>
      value instanceof Map ? [...value.entries()] : value,
    );
  }
  if (store.kind === 'file') {
    const files = await readdir(where!, { recursive: true, withFileTypes: true });
    const texts = await Promise.all(
      files.filter((f) => f.isFile()).map((f) => readFile(join(f.parentPath, f.name), 'latin1')),
    );
    return texts.join('\n');
  }
  throw new Error(`storedText: read a ${store.kind} store's bytes in the test`);
}

/**
 * Runs the wallet task to its confirmation, confirms it, and lets it finish. `restart` (optional) replaces the
 * orchestrator between the confirmation request and the decision, as a crash and a new process would.
 */
export async function runWalletTask(options: {
  store: TaskStore;
  privacy: HarnessOptions['privacy'];
  taskId: string;
  restart?: HarnessOptions['privacy'];
  tracer?: Tracer;
}) {
  const service = new CardService();
  const streams = collectStreams();
  const make = (privacy: HarnessOptions['privacy']) =>
    harness({
      store: options.store,
      script: walletScript(),
      extraTools: walletTools(service),
      privacy,
      inspect: streams.inspect,
      logger: streams.logger,
      hooks: streams.hooks,
      ...(options.tracer ? { tracing: otelTracing(options.tracer) } : {}),
    });
  let h = make(options.privacy);
  const waiting = await h.orchestrator.run({ principal: PAYER, goal: WALLET_GOAL, taskId: options.taskId });
  streams.push(waiting);
  if (options.restart !== undefined) {
    await h.orchestrator.close();
    h = make(options.restart);
  }
  const pending = waiting.pendingConfirmation!;
  const decided = await h.orchestrator.confirm(options.taskId, PAYER, { id: pending.id, argsHash: pending.argsHash });
  streams.push(decided);
  const final = await h.orchestrator.settled(options.taskId);
  streams.push(final, await h.orchestrator.audit(options.taskId), await h.orchestrator.transcript(options.taskId));
  // What the model was shown (its own replies are its own: the model wrote them).
  const requests = (h.model as { requests?: { reply: unknown }[] }).requests ?? [];
  streams.push(requests.map(({ reply: _reply, ...shown }) => shown));
  await h.orchestrator.close();
  return { service, streams, waiting, final, orchestrator: h.orchestrator };
}
