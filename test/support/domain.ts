/**
 * A small test domain for tests of the library's machinery (budgets, confirmations, inspection, restarts...) that
 * need some read and some write but nothing of the booking demo: a petty-cash ledger with
 *
 * - `get_balance`, a read (an account's balance and a free-text note written by its holder);
 * - `pay_out`, a write that moves money (its amount is what it moves), confirmed by the task's user above a
 *   threshold on the task's total, checked against a `payout` mandate, idempotent by the host's key;
 * - `post_note`, a write that moves nothing and needs no confirmation.
 *
 * Built on the public API only (`src/index.ts` and `src/testing`), as a host would build its own domain. Tests
 * about the demo itself (its scenarios, README examples, fixtures, the acceptance harness) stay on examples/booking.
 */
import { z } from 'zod';
import {
  MemoryStore,
  createOrchestrator,
  defineMandate,
  defineTool,
  type OrchestratorOptions,
  type Tool,
} from '../../src/index.js';
import { type ScriptStep, scriptedModel } from '../../src/testing/index.js';

/** The clerk who runs the tasks: may read and pay out from the tenant's accounts. */
export const CLERK = { userId: 'clerk-1', tenantId: 'shop', scopes: ['cash:read', 'cash:pay'] };
export const CASH_GOAL = 'Pay out 150 from account A-1 for the taxi receipt.';

/** What the user asked for: which account, and at most how much in all (also the task's money budget). */
export const payoutMandate = defineMandate(
  'payout',
  z.strictObject({ account_id: z.string().min(1), max_amount: z.number().int().positive() }),
  { money: (terms) => terms.max_amount },
);

/**
 * Safe defaults loosened as a cash office would: payouts up to 1,000 in a task run without the safe default's
 * confirmation, so `pay_out`'s own rule (above `confirmAbove`) decides what is asked. Without it every payout is
 * confirmed, whatever the tool's rule says.
 */
export const clerkAuthority = {
  unconfirmedMoney: { upTo: 1_000, reason: "payouts up to 1,000 in a task are within a clerk's standing authority" },
} as const;

/** The task ends `done` only on a trusted payout result. */
export const PAYOUT_SUCCESS = { tool: 'pay_out', match: { status: 'paid' }, require: ['payout_id'] };

export interface Account {
  tenantId: string;
  balance: number;
  note: string;
}

export interface Payout {
  status: 'paid';
  payout_id: string;
  account_id: string;
  amount: number;
}

/** The ledger behind the tools: accounts, the payouts made (by idempotency key) and the notes posted. */
export class Ledger {
  readonly accounts = new Map<string, Account>([
    ['A-1', { tenantId: 'shop', balance: 1_000, note: 'float for the front desk; ask Kim before large payouts' }],
    ['A-2', { tenantId: 'other-shop', balance: 500, note: 'another tenant' }],
  ]);
  readonly payouts: (Payout & { key: string; by: string })[] = [];
  readonly notes: string[] = [];

  pay(accountId: string, amount: number, key: string, by: string): Payout & { key: string; by: string } {
    const done = this.payouts.find((p) => p.key === key);
    if (done) return done;
    const account = this.accounts.get(accountId)!;
    account.balance -= amount;
    const payout = {
      status: 'paid' as const,
      payout_id: `P-${this.payouts.length + 1}`,
      account_id: accountId,
      amount,
      key,
      by,
    };
    this.payouts.push(payout);
    return payout;
  }
}

export interface DomainOptions {
  /** Above this total (the task's payouts so far plus this one) the task's user confirms (default 100). */
  confirmAbove?: number;
}

/** The three tools on `ledger`. */
export function cashTools(ledger: Ledger, options: DomainOptions = {}): Tool[] {
  const confirmAbove = options.confirmAbove ?? 100;
  const getBalance = defineTool({
    name: 'get_balance',
    description: "Reads an account's balance and its holder's note. Read-only.",
    effect: 'read',
    scopes: ['cash:read'],
    timeoutMs: 200,
    input: z.strictObject({ account_id: z.string().min(1) }),
    output: z.strictObject({ account_id: z.string(), balance: z.number(), note: z.string() }),
    async execute(args, ctx) {
      const account = ledger.accounts.get(args.account_id);
      if (!account || account.tenantId !== ctx.principal.tenantId)
        return { ok: false, code: 'not_found', summary: `no account ${args.account_id}` };
      return { ok: true, value: { account_id: args.account_id, balance: account.balance, note: account.note } };
    },
  });
  const payOut = defineTool({
    name: 'pay_out',
    description: `Pays cash out of an account. Moves money; above ${confirmAbove} in a task the user confirms.`,
    effect: 'write',
    scopes: ['cash:pay'],
    timeoutMs: 200,
    sameKeyRetrySafe: true,
    input: z.strictObject({
      account_id: z.string().min(1),
      amount: z.number().int().positive(),
      memo: z.string().max(200),
    }),
    output: z.strictObject({
      status: z.literal('paid'),
      payout_id: z.string(),
      account_id: z.string(),
      amount: z.number(),
    }),
    amount: (args) => args.amount,
    confirm: (args, _principal, task) => args.amount + task.moneyMoved > confirmAbove,
    describeConfirmation: (args) => `Pay out ${args.amount} from ${args.account_id} (${args.memo})`,
    mandate: payoutMandate.rule((args, terms, task) => {
      if (args.account_id !== terms.account_id)
        return { ok: false, code: 'other_account', summary: `${args.account_id} is not the account the user named` };
      if (args.amount + task.moneyMoved > terms.max_amount)
        return { ok: false, code: 'over_mandate', summary: `more than the ${terms.max_amount} the user asked for` };
      return { ok: true };
    }),
    async validate(args, ctx) {
      const account = ledger.accounts.get(args.account_id);
      if (!account || account.tenantId !== ctx.principal.tenantId)
        return { ok: false, code: 'not_found', summary: `no account ${args.account_id}` };
      if (args.amount > account.balance)
        return { ok: false, code: 'insufficient_funds', summary: `${args.amount} is more than the balance` };
      return { ok: true };
    },
    async execute(args, ctx) {
      const {
        key: _key,
        by: _by,
        ...payout
      } = ledger.pay(args.account_id, args.amount, ctx.idempotencyKey, ctx.principal.userId);
      return { ok: true, value: payout };
    },
    async lookup(idempotencyKey) {
      const found = ledger.payouts.find((p) => p.key === idempotencyKey);
      if (!found) return { found: false };
      const { key: _key, by: _by, ...payout } = found;
      return { found: true, value: payout };
    },
  });
  const postNote = defineTool({
    name: 'post_note',
    description: 'Posts a note to the cash book. Moves no money.',
    effect: 'write',
    scopes: ['cash:read'],
    timeoutMs: 200,
    sameKeyRetrySafe: true,
    confirm: { never: 'a note in the cash book moves nothing and can be struck out' },
    input: z.strictObject({ text: z.string().max(500) }),
    output: z.strictObject({ note_id: z.string() }),
    async execute(args) {
      ledger.notes.push(args.text);
      return { ok: true, value: { note_id: `N-${ledger.notes.length}` } };
    },
    async lookup() {
      return { found: false };
    },
  });
  return [getBalance, payOut, postNote] as Tool[];
}

export interface CashDeskOptions extends DomainOptions, Partial<Omit<OrchestratorOptions, 'tools' | 'model'>> {
  /** The model's script (a scripted model that throws when it runs out). */
  script?: ScriptStep[];
  model?: OrchestratorOptions['model'];
  ledger?: Ledger;
  extraTools?: Tool[];
}

/**
 * An orchestrator on the cash desk: a memory store, the payout mandate, and the host's options as given (no money
 * budget, no loosened defaults unless the test says so).
 */
export function cashDesk(options: CashDeskOptions = {}) {
  const { script, model, ledger: given, extraTools, confirmAbove, ...host } = options;
  const ledger = given ?? new Ledger();
  const store = host.store ?? new MemoryStore();
  const tools = [...cashTools(ledger, { confirmAbove }), ...(extraTools ?? [])];
  const orchestrator = createOrchestrator({
    mandates: [payoutMandate],
    expirySweepMs: 0,
    ...host,
    store,
    tools,
    model: model ?? scriptedModel(script ?? []),
  });
  return { orchestrator, ledger, store, tools };
}
