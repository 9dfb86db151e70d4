/**
 * The acceptance kit against broken hosts: each breaks one thing a real host could get wrong (idempotency, a lookup,
 * a late commit, authorization, a mandate rule, a business rule, a confirmation rule, what is sent, money), and the
 * kit must name it. Several come from an adversarial review of the kit.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AcceptanceReport, expandPlan, formatReport, runAcceptance } from '../src/acceptance/index.js';
import { demoAcceptanceDomain } from '../examples/booking/acceptanceDomain.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { bookingMandate } from '../tools/mandates.js';
import type { Refund } from '../tools/refundOrder.js';
import { scaled } from './support/timeScale.js';

describe('the kit catches a broken host', () => {
  it(
    'a write without idempotency: a lost response becomes two refunds, named with the task and seed',
    { timeout: scaled(30_000) },
    async () => {
      /** A refund service that ignores the idempotency key: each request refunds again, and a lookup finds nothing. */
      class ForgetfulDesk extends RefundDesk {
        private counter = 1;
        override async refund(request: Parameters<RefundDesk['refund']>[0]) {
          const refundId = `TX-F${this.counter++}`;
          this.refunds.push({
            refundId,
            orderId: request.order_id,
            amountCents: request.amount_cents,
            requestedBy: request.requestedBy,
            idempotencyKey: request.idempotencyKey,
          });
          const refund: Refund = {
            status: 'succeeded',
            refund_id: refundId,
            order_id: request.order_id,
            amount_cents: request.amount_cents,
          };
          return { status: 'succeeded' as const, refund };
        }
        override async findByIdempotencyKey(): Promise<Refund | undefined> {
          return undefined;
        }
      }
      const report = await runAcceptance({
        domain: demoAcceptanceDomain({ refundShare: 1, desk: (orders) => new ForgetfulDesk(orders) }),
        plan: { tasks: { lost_write_response: 6, clean: 4 }, seed: 3 },
      });
      expect(report.ok).toBe(false);
      expect(report.metrics.duplicateExecutions).toBe(6);
      expect(report.metrics.businessRecords).toBe(16);
      expect(report.metrics.distinctIdempotencyKeys).toBe(10);
      const duplicates = report.failures.filter((f) => f.invariant === 'one_action_per_intent');
      expect(duplicates.length).toBeGreaterThanOrEqual(6);
      expect(new Set(duplicates.map((f) => f.fault))).toEqual(new Set(['lost_write_response']));
      expect(duplicates[0]).toMatchObject({
        taskId: expect.stringMatching(/^acc-3-\d+$/),
        seed: expect.any(Number),
        detail: expect.stringMatching(/2 refund_order records under one idempotency key/),
      });
      expect(formatReport(report)).toMatch(/replay the first: --seed 3 --only \d+/);
    },
  );

  it(
    'a write tool without its authorization check: the board room gets booked, and the kit says so',
    { timeout: scaled(30_000) },
    async () => {
      const report = await runAcceptance({
        domain: demoAcceptanceDomain({
          refundShare: 0,
          alterTools: (tools) => tools.map((t) => (t.name === 'reserve_room' ? { ...t, authorize: undefined } : t)),
        }),
        plan: { tasks: { other_tenant: 5 }, seed: 4 },
      });
      expect(report.ok).toBe(false);
      expect(report.rows[0]).toMatchObject({
        fault: 'other_tenant',
        injected: 5,
        blockedBeforeExecution: 0,
        executed: 5,
      });
      expect(report.failures.map((f) => f.invariant)).toContain('no_unauthorized_side_effect');
      expect(report.failures.find((f) => f.invariant === 'no_unauthorized_side_effect')!.detail).toMatch(
        /reserve_room .*"room_id":"R1"/,
      );
    },
  );

  it(
    'a write tool whose mandate rule lets anything through: a model obeying injected text books another day, and the kit says so',
    { timeout: scaled(30_000) },
    async () => {
      // (Without any mandate rule the gate fails closed: a tool with no rule for the task's mandate kind is refused.)
      const anything = bookingMandate.rule(() => ({ ok: true }));
      const report = await runAcceptance({
        domain: demoAcceptanceDomain({
          refundShare: 0,
          alterTools: (tools) => tools.map((t) => (t.name === 'reserve_room' ? { ...t, mandate: anything } : t)),
        }),
        plan: { tasks: { injected_output: 12 }, seed: 6 },
      });
      expect(report.ok).toBe(false);
      const obeyed = report.failures.filter((f) => f.invariant === 'injection_changes_nothing');
      expect(obeyed.length).toBeGreaterThan(0);
      expect(obeyed[0]!.detail).toMatch(/reserve_room .*"room_id":"R9".*\(obeyed, call c2_1\) reached the tool/);
    },
  );
});

describe('the kit catches a broken host, found by an adversarial review', () => {
  const failed = (report: AcceptanceReport) => [...new Set(report.failures.map((f) => f.invariant))].sort();
  type RefundRow = RefundDesk['refunds'][number];
  const receipt = (row: RefundRow): Refund => ({
    status: 'succeeded',
    refund_id: row.refundId,
    order_id: row.orderId,
    amount_cents: row.amountCents,
  });
  /** A refund desk that refunds again on every request, whatever the key; its lookup does find by key. */
  class NoDedupeDesk extends RefundDesk {
    private counter = 1;
    protected commit(request: Parameters<RefundDesk['refund']>[0]) {
      const row = {
        refundId: `TX-N${this.counter++}`,
        orderId: request.order_id,
        amountCents: request.amount_cents,
        requestedBy: request.requestedBy,
        idempotencyKey: request.idempotencyKey,
      };
      this.refunds.push(row);
      return { status: 'succeeded' as const, refund: receipt(row) };
    }
    override async refund(request: Parameters<RefundDesk['refund']>[0]) {
      return this.commit(request);
    }
    override async findByIdempotencyKey(key: string): Promise<Refund | undefined> {
      const row = this.refunds.find((r) => r.idempotencyKey === key);
      return row && receipt(row);
    }
  }
  const refunds = (options: Parameters<typeof demoAcceptanceDomain>[0] = {}) =>
    demoAcceptanceDomain({ refundShare: 1, ...options });
  const withTool = (name: string, patch: (tool: any) => object) => (tools: any[]) =>
    tools.map((t) => (t.name === name ? { ...t, ...patch(t) } : t));

  it(
    'a service that ignores the key but whose lookup works: a redelivered write refunds twice',
    { timeout: scaled(30_000) },
    async () => {
      const report = await runAcceptance({
        domain: refunds({ desk: (orders) => new NoDedupeDesk(orders) }),
        plan: { tasks: { redelivered_write: 4, lost_write_response: 2 }, seed: 8 },
      });
      expect(failed(report)).toEqual(['one_action_per_intent']);
      expect(report.rows.find((r) => r.fault === 'redelivered_write')).toMatchObject({ tasks: 4, duplicates: 4 });
    },
  );

  it(
    'a business rule missing: the invalid refund reaches the human, and the kit counts that as a failure',
    { timeout: scaled(30_000) },
    async () => {
      const report = await runAcceptance({
        domain: refunds({ alterTools: withTool('refund_order', () => ({ validate: undefined })) }),
        plan: { tasks: { invalid_business: 4 }, seed: 9 },
      });
      expect(failed(report)).toEqual(['blocked_before_execution']);
      expect(report.rows[0]).toMatchObject({
        injected: 4,
        askedHuman: 4,
        blockedBeforeExecution: 0,
        refusedBy: { confirmation: 4 },
      });
    },
  );

  it(
    'a host whose writes always fail: the control tasks do not succeed, and the run is not a pass',
    { timeout: scaled(30_000) },
    async () => {
      const closed = async () => ({ ok: false as const, code: 'closed', summary: 'closed for the day' });
      const report = await runAcceptance({
        domain: demoAcceptanceDomain({
          alterTools: (tools) => tools.map((t) => (t.effect === 'write' ? { ...t, validate: closed } : t)),
        }),
        plan: { tasks: { clean: 3, lost_write_response: 3 }, seed: 10 },
      });
      expect(failed(report)).toEqual(['control_succeeds', 'fault_applied']);
    },
  );

  it(
    'a tool that sends another amount than the one confirmed: the record does not match the request',
    { timeout: scaled(30_000) },
    async () => {
      const report = await runAcceptance({
        domain: refunds({
          alterTools: withTool('refund_order', (t) => ({
            execute: (args: object, ctx: object) => t.execute({ ...args, amount_cents: 29_900 }, ctx),
          })),
        }),
        plan: { tasks: { clean: 2 }, seed: 11 },
      });
      expect(failed(report)).toEqual(['side_effect_matches_request']);
      expect(report.failures.find((f) => f.invariant === 'side_effect_matches_request')!.detail).toMatch(
        /has amount_cents 29900, but the write the user asked for has 19900/,
      );
    },
  );

  it(
    'a tool that declares no amount: the money its records move is over the limit',
    { timeout: scaled(30_000) },
    async () => {
      const base = refunds({ alterTools: withTool('refund_order', () => ({ amount: () => 0 })) });
      const domain = {
        ...base,
        async createHost() {
          const host = await base.createHost();
          return {
            ...host,
            caseFor: (i: number, r: () => number, f: never) => ({
              ...host.caseFor(i, r, f),
              mandate: undefined,
              limits: { money: 10_000 },
            }),
          };
        },
      };
      const report = await runAcceptance({ domain, plan: { tasks: { clean: 2 }, seed: 12 } });
      expect(report.failures.filter((f) => f.invariant === 'within_budget').map((f) => f.detail)).toEqual([
        "the service's records move 19900, over the task's money limit 10000",
        "the service's records move 19900, over the task's money limit 10000",
      ]);
    },
  );

  it(
    "a tool that waives its confirmation, on a host that lets any amount run unconfirmed: judged by the domain's own policy",
    { timeout: scaled(30_000) },
    async () => {
      // A missing rule is no longer enough to break it (a write is confirmed by default): it takes a written waiver, and a
      // host that lifts the money limit of unconfirmed writes.
      const domain = refunds({
        alterTools: withTool('refund_order', () => ({ confirm: { never: 'a broken host: refunds need nobody' } })),
        loosen: { unconfirmedMoney: { upTo: 100_000_000, reason: 'a broken host: no limit' } },
      });
      const report = await runAcceptance({ domain, plan: { tasks: { clean: 3 }, seed: 13 } });
      expect(failed(report)).toEqual(['confirmed_side_effect']);
      expect(report.metrics.unconfirmedSideEffects).toBe(3);
    },
  );

  it('a lookup that never finds: the committed write it denied is named', { timeout: scaled(30_000) }, async () => {
    const report = await runAcceptance({
      domain: refunds({ alterTools: withTool('refund_order', () => ({ lookup: async () => ({ found: false }) })) }),
      plan: { tasks: { lost_write_response: 3 }, seed: 14 },
    });
    expect(failed(report)).toContain('lookup_finds_committed');
  });

  it(
    'a service that commits after its timeout: the kit waits for it and sees the second refund',
    { timeout: scaled(30_000) },
    async () => {
      /** Check, then act, with the act late: a resend under the same key during the first send commits twice. */
      class LateDesk extends NoDedupeDesk {
        private readonly first = new Set<string>();
        override async refund(request: Parameters<RefundDesk['refund']>[0]) {
          const existing = this.refunds.find((r) => r.idempotencyKey === request.idempotencyKey);
          if (existing) return { status: 'succeeded' as const, refund: receipt(existing) };
          if (!this.first.has(request.idempotencyKey)) {
            this.first.add(request.idempotencyKey);
            await new Promise((resolve) => setTimeout(resolve, 200));
          }
          return this.commit(request);
        }
      }
      const report = await runAcceptance({
        domain: refunds({ desk: (orders) => new LateDesk(orders) }),
        plan: { tasks: { clean: 2 }, seed: 15 },
      });
      expect(failed(report)).toContain('one_action_per_intent');
      expect(report.metrics.duplicateExecutions).toBe(2);
    },
  );

  it(
    'no false alarm: a schema default, a lost response to a refused write, records from before the run',
    { timeout: scaled(30_000) },
    async () => {
      const defaults = await runAcceptance({
        domain: refunds({
          alterTools: withTool('refund_order', (t) => ({
            input: t.input.extend({ notify_customer: z.boolean().default(true) }),
          })),
        }),
        plan: { tasks: { clean: 2, lost_write_response: 2 }, seed: 16 },
      });
      expect(defaults.failures).toEqual([]);
      const declined = await runAcceptance({
        domain: refunds({
          alterTools: withTool('refund_order', () => ({
            execute: async () => ({ ok: false, code: 'card_declined', summary: 'declined' }),
          })),
        }),
        plan: { tasks: { lost_write_response: 2 }, seed: 17 },
      });
      expect(declined.failures.map((f) => f.invariant)).not.toContain('one_action_per_intent');
      class OldDesk extends RefundDesk {
        constructor(orders: ConstructorParameters<typeof RefundDesk>[0]) {
          super(orders);
          this.refunds.push({
            refundId: 'TX-1',
            orderId: 'O-1',
            amountCents: 100,
            requestedBy: 'E1',
            idempotencyKey: 'last-week',
          });
        }
      }
      const before = await runAcceptance({
        domain: refunds({ desk: (orders) => new OldDesk(orders) }),
        plan: { tasks: { clean: 2 }, seed: 18 },
      });
      expect(before.failures).toEqual([]);
    },
  );

  it(
    'a case without a success criterion: its control tasks end answered, and the kit says what to add',
    { timeout: scaled(30_000) },
    async () => {
      const domain = refunds();
      const withoutCriterion = {
        ...domain,
        async createHost() {
          const host = await domain.createHost();
          return {
            ...host,
            caseFor: (...args: Parameters<typeof host.caseFor>) => ({ ...host.caseFor(...args), success: undefined }),
          };
        },
      };
      const report = await runAcceptance({ domain: withoutCriterion, plan: { tasks: { clean: 2 }, seed: 12 } });
      expect(failed(report)).toEqual(['control_succeeds']);
      expect(report.failures.map((f) => f.detail)).toEqual([
        expect.stringContaining('ended answered, not done: without a success criterion'),
        expect.stringContaining('give the case a `success` criterion'),
      ]);
      // Neither done nor failed: the report counts them apart, in a column shown only when a task ended so.
      expect(report.rows.find((r) => r.fault === 'clean')).toMatchObject({ tasks: 2, done: 0, answered: 2 });
      const text = formatReport(report);
      expect(text).toMatch(/\| wrong outcomes \| done \| answered \|/);
      expect(text).toMatch(/\| clean +(\| +\d+ ){8}\| +0 \| +2 \|/);
    },
  );

  it('refuses a run that would judge nothing', async () => {
    await expect(runAcceptance({ domain: demoAcceptanceDomain(), plan: { tasks: {}, seed: 1 } })).rejects.toThrow(
      /the plan has no tasks/,
    );
    await expect(
      runAcceptance({ domain: demoAcceptanceDomain(), plan: { tasks: { clean: 2 }, seed: 1 }, only: [5] }),
    ).rejects.toThrow(/the plan has tasks 0 to 1; there is no task 5/);
    await expect(
      runAcceptance({
        domain: demoAcceptanceDomain(),
        plan: { tasks: { clean: 2 }, seed: 1 },
        concurrency: Number.NaN,
      }),
    ).rejects.toThrow(/concurrency must be a positive integer/);
  });

  it('gives the same tasks whatever the order of the plan', () => {
    expect(expandPlan({ tasks: { clean: 3, read_timeout: 2, lost_write_response: 2 }, seed: 1 })).toEqual(
      expandPlan({ tasks: { lost_write_response: 2, read_timeout: 2, clean: 3 }, seed: 1 }),
    );
  });
});
