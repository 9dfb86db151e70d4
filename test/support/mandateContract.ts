/**
 * The mandate-claim part of the store contract: a mandate authorises one task. Every built-in store runs it; the
 * byte-level check of the erasure runs where the factory can dump what the store holds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MandateUsedError, TaskExistsError } from '../../src/errors.js';
import { type MandateClaims, type TaskStore, claimsMandates, isErasable } from '../../src/store/taskStore.js';
import type { RetentionOptions } from '../../src/store/erasure.js';
import { T0, createRequest } from './envelopes.js';
import type { MadeStore, StoreFactory } from './erasureContract.js';

const GDPR = { reason: 'gdpr_erasure', at: T0 + 99_000 };

export function describeMandateContract(makeStore: StoreFactory): void {
  describe('mandate claims', () => {
    const opened: MadeStore[] = [];
    afterEach(async () => {
      for (const made of opened.splice(0)) {
        await made.store.close();
        await made.cleanup();
      }
    });

    async function open(options?: {
      retention?: RetentionOptions;
    }): Promise<MadeStore & { store: TaskStore & MandateClaims }> {
      const made = await makeStore(options);
      opened.push(made);
      expect(claimsMandates(made.store)).toBe(true);
      return made as MadeStore & { store: TaskStore & MandateClaims };
    }

    it('gives a mandate to the first task, again to that task (a retried start), and to no other', async () => {
      const { store } = await open();
      expect(await store.claimMandate('m-1', 't-1')).toBe('claimed');
      expect(await store.claimMandate('m-1', 't-1')).toBe('held');
      const refused = await store.claimMandate('m-1', 't-2').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(MandateUsedError);
      expect(refused).toMatchObject({ code: 'mandate_used', mandateId: 'm-1', taskId: 't-2' });
      // The refused task can take another mandate; the first still holds its own.
      expect(await store.claimMandate('m-2', 't-2')).toBe('claimed');
      await expect(store.claimMandate('m-1', 't-3')).rejects.toBeInstanceOf(MandateUsedError);
    });

    it('lets exactly one of several concurrent claims of one mandate win', async () => {
      const { store } = await open();
      const tasks = ['c-1', 'c-2', 'c-3', 'c-4', 'c-5'];
      const results = await Promise.allSettled(tasks.map((taskId) => store.claimMandate('m-race', taskId)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(MandateUsedError);
      const winner = tasks[results.findIndex((r) => r.status === 'fulfilled')]!;
      expect(await store.claimMandate('m-race', winner)).toBe('held');
    });

    it('refuses a second mandate for a task that holds one (TaskExistsError)', async () => {
      const { store } = await open();
      await store.claimMandate('m-a', 't-two');
      await expect(store.claimMandate('m-b', 't-two')).rejects.toBeInstanceOf(TaskExistsError);
      // m-b stays free.
      expect(await store.claimMandate('m-b', 't-other')).toBe('claimed');
    });

    it('gives a claim back only for the task that holds it', async () => {
      const { store } = await open();
      await store.claimMandate('m-back', 't-1');
      await store.releaseMandate('m-back', 't-2');
      await expect(store.claimMandate('m-back', 't-2')).rejects.toBeInstanceOf(MandateUsedError);
      await store.releaseMandate('m-back', 't-1');
      await store.releaseMandate('m-back', 't-1');
      expect(await store.claimMandate('m-back', 't-2')).toBe('claimed');
      // t-1 gave its mandate back: it may claim another one.
      expect(await store.claimMandate('m-new', 't-1')).toBe('claimed');
    });

    it('is given back by the task’s erasure, leaving nothing that names the task but its tombstone', async () => {
      const { store, raw } = await open();
      if (!isErasable(store)) throw new Error('every built-in store can erase');
      expect(await store.claimMandate('mnd-gone', 'claim-erased')).toBe('claimed');
      await store.save(createRequest('claim-erased'));
      await store.erase('claim-erased', GDPR);
      if (raw) {
        const allowed = raw.tombstoneLocations('claim-erased');
        for (const entry of await raw.dump()) {
          if (entry.location.includes('claim-erased') || entry.text.includes('claim-erased'))
            expect(allowed, `${entry.location} still names the erased task`).toContain(entry.location);
          expect(
            entry.location.includes('mnd-gone') || entry.text.includes('mnd-gone'),
            `${entry.location} still holds the claim`,
          ).toBe(false);
        }
      }
      expect(await store.claimMandate('mnd-gone', 'another')).toBe('claimed');
    });

    it('is given back by retention with the finished task', async () => {
      const { store } = await open({ retention: { finishedTaskMs: 1_000 } });
      if (!isErasable(store)) throw new Error('every built-in store can erase');
      await store.claimMandate('m-old', 'finished-1');
      await store.save(createRequest('finished-1', { state: 'done', updatedAt: T0 }));
      expect((await store.sweepRetention(T0 + 1_200)).erased.map((t) => t.taskId)).toEqual(['finished-1']);
      expect(await store.claimMandate('m-old', 'another')).toBe('claimed');
    });
  });
}
