/**
 * Durability across real process crashes. Each case runs the demo in a worker process on a RedisStore with the
 * Redis-backed booking/refund services, makes it reach an effect boundary (a fault armed in Redis, or a model
 * turn that hangs), SIGKILLs it there, then lets a NEW process `recover()` the task once the 500 ms lease has
 * expired. The task must end as an uncrashed run does, with as many business records as idempotency keys, and
 * with every save the killed process saw acknowledged still in the store, in order.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisBookingService, type RedisDemoFaults } from '../examples/booking/redisBookingService.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { WorkerConfig } from './support/crashProtocol.js';
import {
  type Business,
  type Outcome,
  auditOf,
  businessOf,
  expectAcknowledgedKept,
  kinds,
  leaseExpired,
  outcomeOf,
} from './support/crashMatrix.js';
import { useTestRedis } from './support/redis.js';
import { ChildPool, type Worker } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();
const TASK = 'crash-1';
/**
 * Short, so a killed worker's lease expires soon; scaled, because a live worker that cannot renew within it (a process
 * starved of CPU on a loaded machine) loses its task to a fence: a failure of the machine, not of the code.
 */
const LEASE = { ttlMs: scaled(500) };

describe.skipIf(!redis)('crash matrix: a worker process SIGKILLed at each effect boundary', () => {
  const pool = new ChildPool();
  const prefixes: string[] = [];
  let client: Redis;

  /** A fresh prefix with the demo data seeded and `faults` armed, plus a store and services to inspect it. */
  async function world(faults: RedisDemoFaults = {}) {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix);
    const services = new RedisBookingService({ client, prefix });
    await services.seed();
    await services.injectFaults(faults);
    const store = new RedisStore({ client, prefix });
    const config = (overrides: Partial<WorkerConfig>): WorkerConfig => ({
      redisUrl: redis!.url,
      prefix,
      taskId: TASK,
      flow: 'booking',
      action: 'run',
      lease: LEASE,
      ...overrides,
    });
    return { prefix, services, store, config };
  }

  async function finished(worker: Worker) {
    const exit = await worker.ended(20_000);
    expect(exit, worker.transcript()).toEqual({ code: 0, signal: null });
    return worker;
  }

  /** The uncrashed run of a flow: its outcome is what every crashed run must reach. */
  const baselines = new Map<string, Promise<Outcome & Business>>();
  function baseline(flow: 'booking' | 'refund'): Promise<Outcome & Business> {
    if (!baselines.has(flow)) {
      baselines.set(
        flow,
        (async () => {
          const w = await world();
          await finished(pool.worker(`baseline-${flow}`, w.config({ flow })));
          const business = await businessOf(w.services);
          return { ...outcomeOf((await w.store.load(TASK))!, business), ...business };
        })(),
      );
    }
    return baselines.get(flow)!;
  }

  beforeAll(() => {
    client = redis!.connect();
  });
  afterEach(() => pool.killAll());
  afterAll(async () => {
    await pool.killAll();
    for (const prefix of prefixes) await redis!.deleteKeys(prefix);
    await redis?.stop();
  });

  const boundaries: {
    name: string;
    flow: 'booking' | 'refund';
    faults?: RedisDemoFaults;
    first: Partial<WorkerConfig>;
    second?: Partial<WorkerConfig>;
    marker: string;
    /** The state the killed process had made durable when it reached the boundary. */
    durable: string;
    /** How recovery went, read from the final audit journal. */
    recovery: (audit: Awaited<ReturnType<typeof auditOf>>) => void;
  }[] = [
    {
      name: '(a) during the model call (after the booking was recorded)',
      flow: 'booking',
      first: { hangModelTurn: 3 },
      marker: 'model-call',
      durable: 'thinking',
      recovery: (audit) => {
        expect(kinds(audit, 'tool_started').filter((e) => e.tool === 'reserve_room')).toHaveLength(1);
        expect(kinds(audit, 'write_lookup')).toEqual([]);
      },
    },
    {
      name: '(b) after the write intent is durable, before the side effect',
      flow: 'booking',
      faults: { stallReserves: 1 },
      first: { timeouts: { reserve: 60_000 } },
      marker: 'before-effect',
      durable: 'executing.writing',
      recovery: (audit) => {
        expect(
          kinds(audit, 'tool_finished')
            .filter((e) => e.tool === 'reserve_room')
            .map((e) => e.code),
        ).toEqual(['interrupted', 'ok']);
        expect(kinds(audit, 'write_lookup').map((e) => e.result)).toEqual(['not_found']);
        const attempts = kinds(audit, 'tool_started').filter((e) => e.tool === 'reserve_room');
        expect(attempts.map((e) => e.attempt)).toEqual([1, 2]);
        expect(new Set(attempts.map((e) => e.idempotencyKey)).size).toBe(1);
      },
    },
    {
      name: '(c) after the side effect, before its result is persisted',
      flow: 'booking',
      faults: { loseReserveResponses: 1 },
      first: { timeouts: { reserve: 60_000 } },
      marker: 'after-effect',
      durable: 'executing.writing',
      recovery: (audit) => {
        expect(
          kinds(audit, 'tool_finished')
            .filter((e) => e.tool === 'reserve_room')
            .map((e) => e.code),
        ).toEqual(['interrupted']);
        expect(kinds(audit, 'write_lookup').map((e) => e.result)).toEqual(['found']);
        expect(kinds(audit, 'tool_started').filter((e) => e.tool === 'reserve_room')).toHaveLength(1);
      },
    },
    {
      name: '(d) while awaiting confirmation (refund above the threshold)',
      flow: 'refund',
      first: { blockWhenWaiting: true },
      second: { confirmWaiting: true },
      marker: 'awaiting-confirmation',
      durable: 'executing.awaitingConfirmation',
      recovery: (audit) => {
        expect(kinds(audit, 'confirmation').map((e) => [e.action, e.userId])).toEqual([
          ['requested', null],
          ['granted', 'E17'],
        ]);
        expect(kinds(audit, 'tool_started').filter((e) => e.tool === 'refund_order')).toHaveLength(1);
      },
    },
    {
      name: '(e) during reconciliation (response lost, timed out, lookup in flight)',
      flow: 'booking',
      faults: { loseReserveResponses: 1, hangLookups: 1 },
      first: { timeouts: { reserve: 300 } },
      marker: 'reconciling',
      durable: 'executing.reconciling',
      recovery: (audit) => {
        expect(
          kinds(audit, 'tool_finished')
            .filter((e) => e.tool === 'reserve_room')
            .map((e) => e.code),
        ).toEqual(['timeout']);
        expect(kinds(audit, 'write_lookup').map((e) => e.result)).toEqual(['found']);
        expect(kinds(audit, 'tool_started').filter((e) => e.tool === 'reserve_room')).toHaveLength(1);
      },
    },
  ];

  it.each(boundaries)(
    '$name: same outcome, no duplicate, nothing acknowledged lost',
    async (boundary) => {
      const expected = await baseline(boundary.flow);
      const w = await world(boundary.faults);

      const first = pool.worker('first', w.config({ flow: boundary.flow, ...boundary.first }));
      await first.waitFor(`AT ${boundary.marker}`);
      await first.kill();
      const acked = first.saved();
      // The boundary was reached with the state before it durable (the intent, for a write).
      const at = first.lines.indexOf(`AT ${boundary.marker}`);
      const lastSavedBeforeAt = first.lines.slice(0, at).filter((l) => l.startsWith('SAVED ')).length;
      expect(acked[lastSavedBeforeAt - 1]?.stateValue).toBe(boundary.durable);
      expect((await w.store.load(TASK))!.summary.stateValue).toBe(boundary.durable);

      await leaseExpired(client, w.prefix, TASK);
      const second = await finished(
        pool.worker('second', w.config({ flow: boundary.flow, action: 'recover', ...boundary.second })),
      );
      expect(second.report()).toMatchObject({
        resumed: boundary.flow === 'refund' ? [] : [TASK],
        busy: [],
        quarantined: [],
      });

      const final = (await w.store.load(TASK))!;
      const business = await businessOf(w.services);
      const audit = await auditOf(w.store, final);
      expect(outcomeOf(final, business)).toEqual({
        state: expected.state,
        code: expected.code,
        answer: expected.answer,
        rows: expected.rows,
      });
      expect(business.records).toBe(business.keys);
      expect(business.records).toBe(expected.records);
      // Every armed fault was met by the killed process, none by the one that recovered.
      expect(await w.services.pendingFaults()).toEqual(
        Object.fromEntries(Object.keys(boundary.faults ?? {}).map((f) => [f, 0])),
      );
      expectAcknowledgedKept(acked, final, audit);
      // The new process continued from the last durable revision and its own saves are the task's last ones.
      const resumedAcks = second.saved();
      expect(resumedAcks[0]!.revision).toBe(acked.at(-1)!.revision + 1);
      expect(resumedAcks.at(-1)!.revision).toBe(final.revision);
      boundary.recovery(audit);
      console.log(
        `crash ${boundary.name}: ${final.summary.state}/${expected.code}; rows [${business.rows.join(', ')}]; ` +
          `records ${business.records} = keys ${business.keys}; requests ${business.requests}; ` +
          `acked before kill r1..r${acked.at(-1)!.revision} (audit ${acked.at(-1)!.audit}); final r${final.revision} (audit ${final.journal.audit})`,
      );
    },
    scaled(40_000),
  );

  it(
    '(f) race: of two processes recovering the same orphan at once, exactly one drives it',
    async () => {
      const expected = await baseline('booking');
      const w = await world();
      const orphaned = pool.worker('orphaned', w.config({ hangModelTurn: 1 }));
      await orphaned.waitFor('AT model-call');
      await orphaned.kill();
      // The winner's search is slow, so the task is still running (and leased) when the loser looks: scaled, since a
      // loaded machine can start the loser's recover() that much later than the winner's.
      await w.services.injectFaults({ slowSearches: 1, slowSearchMs: scaled(2_500) });
      await leaseExpired(client, w.prefix, TASK);

      const racers = [1, 2].map((n) => pool.worker(`racer-${n}`, w.config({ action: 'recover', waitForGo: true })));
      await Promise.all(racers.map((r) => r.waitFor('READY')));
      for (const racer of racers) racer.send('GO');
      await Promise.all(racers.map((r) => finished(r)));

      const reports = racers.map((r) => r.report()!);
      const winner = racers.find((r) => r.report()!.resumed.includes(TASK));
      const loser = racers.find((r) => r !== winner)!;
      expect(reports.map((r) => r.resumed.length).sort()).toEqual([0, 1]);
      expect(loser.report()).toMatchObject({ resumed: [], busy: [TASK] });
      expect(loser.saved()).toEqual([]);
      expect(loser.result()).toBeUndefined();
      expect(winner!.result()).toMatchObject({ state: expected.state, code: expected.code, answer: expected.answer });

      const final = (await w.store.load(TASK))!;
      const business = await businessOf(w.services);
      expect(outcomeOf(final, business)).toEqual({
        state: expected.state,
        code: expected.code,
        answer: expected.answer,
        rows: expected.rows,
      });
      expect(business.records).toBe(business.keys);
      expectAcknowledgedKept(orphaned.saved(), final, await auditOf(w.store, final));
      expect(winner!.saved().at(-1)!.revision).toBe(final.revision);
      console.log(
        `crash (f) race: ${reports.map((r) => JSON.stringify({ resumed: r.resumed, busy: r.busy })).join(' vs ')}; rows [${business.rows.join(', ')}]`,
      );
    },
    scaled(40_000),
  );

  it(
    '(g) fence: a process paused past its lease is refused at its next save, and the new driver’s state stands',
    async () => {
      const expected = await baseline('booking');
      const w = await world({ slowSearches: 1, slowSearchMs: 3_000 });
      // A's renewer is off (a frozen VM renews nothing either), so what meets A when it wakes is its next save's
      // fence check. With renewals on, A's first renewal would notice the loss and stop it before any save.
      const paused = pool.worker(
        'paused',
        w.config({ lease: { ttlMs: LEASE.ttlMs, renewEveryMs: 3_600_000 }, timeouts: { search: 60_000 } }),
      );
      await paused.waitFor('AT search');
      paused.signal('SIGSTOP');
      await leaseExpired(client, w.prefix, TASK);

      const takeover = await finished(pool.worker('takeover', w.config({ action: 'recover' })));
      expect(takeover.report()).toMatchObject({ resumed: [TASK] });
      const afterTakeover = (await w.store.load(TASK))!;
      expect(afterTakeover.summary.state).toBe('done');

      paused.signal('SIGCONT');
      await paused.waitFor('FAILED');
      expect(paused.failure()).toMatchObject({
        name: 'FencedOutError',
        message: expect.stringMatching(/fence \d+ is stale; the lease was acquired since/),
      });
      expect(await paused.ended(), paused.transcript()).toEqual({ code: 3, signal: null });
      // Every save the paused process saw acknowledged had landed before the takeover (a reply can be read only
      // after SIGCONT): the new driver resumed from its last one, and nothing of the paused process came after.
      const pausedAcks = paused.saved();
      expect(takeover.saved()[0]!.revision).toBe(pausedAcks.at(-1)!.revision + 1);

      const final = (await w.store.load(TASK))!;
      expect(final.revision).toBe(afterTakeover.revision);
      expect(final.revision).toBe(takeover.saved().at(-1)!.revision);
      const business = await businessOf(w.services);
      expect(outcomeOf(final, business)).toEqual({
        state: expected.state,
        code: expected.code,
        answer: expected.answer,
        rows: expected.rows,
      });
      expect(business.records).toBe(business.keys);
      expect(business.records).toBe(1);
      const audit = await auditOf(w.store, final);
      expectAcknowledgedKept(pausedAcks, final, audit);
      // Only the new driver's search result was recorded.
      expect(kinds(audit, 'tool_finished').filter((e) => e.tool === 'find_available_rooms')).toHaveLength(1);
      console.log(
        `crash (g) fence: paused worker ${paused.failure()!.name}: ${paused.failure()!.message}; final r${final.revision} by the takeover; rows [${business.rows.join(', ')}]`,
      );
    },
    scaled(40_000),
  );
});
