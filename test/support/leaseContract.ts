/**
 * The lease part of the store contract, for stores that have `leases`; each test is skipped on stores without.
 * Fences are compared as integers when both are decimal strings, else as strings (zero-padded tokens).
 */
import { describe, expect, it, type TestContext } from 'vitest';
import { FencedOutError } from '../../src/errors.js';
import type { LeaseManager, TaskStore } from '../../src/store/taskStore.js';
import { createRequest, nextRequest } from './envelopes.js';

const TTL = 10_000;

/** True when fence `a` is strictly larger than fence `b`. */
export function fenceAfter(a: string, b: string): boolean {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a.length === b.length ? a > b : a.length > b.length;
}

/** Registers the lease tests; `getStore` returns the current test's store. */
export function describeLeaseContract(getStore: () => TaskStore): void {
  describe('leases (stores that have them)', () => {
    function leasesOrSkip(context: TestContext): LeaseManager {
      const { leases } = getStore();
      if (!leases) context.skip(`store "${getStore().kind}" has no leases`);
      return leases;
    }

    it('gives a lease to the first taker and null to the next', async (context) => {
      const leases = leasesOrSkip(context);
      const before = Date.now();
      const lease = await leases.acquire('l-1', TTL);
      expect(lease).toMatchObject({ taskId: 'l-1', token: expect.any(String), fence: expect.any(String) });
      expect(lease!.expiresAt).toBeGreaterThanOrEqual(before + TTL - 1000);
      expect(await leases.acquire('l-1', TTL)).toBeNull();
      expect(await leases.acquire('l-2', TTL)).not.toBeNull();
    });

    it('renews only for the token that holds the lease', async (context) => {
      const leases = leasesOrSkip(context);
      const lease = (await leases.acquire('l-renew', TTL))!;
      expect(await leases.renew(lease, TTL)).toBe(true);
      expect(await leases.renew({ ...lease, token: `${lease.token}-impostor` }, TTL)).toBe(false);
      expect(await leases.acquire('l-renew', TTL)).toBeNull();
    });

    it('ignores a release with the wrong token and frees the lease on the right one', async (context) => {
      const leases = leasesOrSkip(context);
      const lease = (await leases.acquire('l-release', TTL))!;
      await leases.release({ ...lease, token: `${lease.token}-impostor` });
      expect(await leases.acquire('l-release', TTL)).toBeNull();
      await leases.release(lease);
      expect(await leases.renew(lease, TTL)).toBe(false);
      expect(await leases.acquire('l-release', TTL)).not.toBeNull();
    });

    it('hands out strictly increasing fences across acquisitions', async (context) => {
      const leases = leasesOrSkip(context);
      const fences: string[] = [];
      for (let i = 0; i < 4; i++) {
        const lease = (await leases.acquire('l-fence', TTL))!;
        fences.push(lease.fence);
        await leases.release(lease);
      }
      for (let i = 1; i < fences.length; i++)
        expect(fenceAfter(fences[i]!, fences[i - 1]!), fences.join(' < ')).toBe(true);
    });

    it('lets another holder take an expired lease and refuses the old holder', async (context) => {
      const leases = leasesOrSkip(context);
      const old = (await leases.acquire('l-expire', 100))!;
      await new Promise((resolve) => setTimeout(resolve, 400));
      const next = await leases.acquire('l-expire', TTL);
      expect(next).not.toBeNull();
      expect(fenceAfter(next!.fence, old.fence)).toBe(true);
      expect(await leases.renew(old, TTL)).toBe(false);
    });

    it('refuses a save carrying a stale fence with FencedOutError and accepts the current one', async (context) => {
      const leases = leasesOrSkip(context);
      const store = getStore();
      const first = (await leases.acquire('l-save', TTL))!;
      const create = createRequest('l-save');
      await store.save({ ...create, fence: first.fence });
      await leases.release(first);
      const second = (await leases.acquire('l-save', TTL))!;
      const update = nextRequest(create.envelope, { state: 'done' });
      await expect(store.save({ ...update, fence: first.fence })).rejects.toBeInstanceOf(FencedOutError);
      expect(await store.load('l-save')).toStrictEqual(create.envelope);
      await store.save({ ...update, fence: second.fence });
      expect(await store.load('l-save')).toStrictEqual(update.envelope);
    });

    describe('acquireAndRead (stores that have it)', () => {
      function readingOrSkip(context: TestContext): Required<Pick<TaskStore, 'acquireAndRead' | 'leases'>> & TaskStore {
        leasesOrSkip(context);
        const store = getStore();
        if (!store.acquireAndRead) context.skip(`store "${store.kind}" has no acquireAndRead`);
        return store as Required<Pick<TaskStore, 'acquireAndRead' | 'leases'>> & TaskStore;
      }

      it('takes the lease and reads what load and quarantined read, as it stands once the lease is taken', async (context) => {
        const store = readingOrSkip(context);
        const { leases } = store;
        const create = createRequest('l-read');
        await store.save(create);
        const taken = (await store.acquireAndRead('l-read', TTL))!;
        expect(taken.lease).toMatchObject({ taskId: 'l-read', fence: expect.any(String) });
        expect(taken.read!.quarantined).toBeNull();
        expect(taken.read!.load()).toStrictEqual(await store.load('l-read'));
        // The lease is held: the next taker gets nothing, and a save under its fence lands.
        expect(await store.acquireAndRead('l-read', TTL)).toBeNull();
        expect(await leases.acquire('l-read', TTL)).toBeNull();
        const update = nextRequest(create.envelope, { state: 'done' });
        await store.save({ ...update, fence: taken.lease.fence });
        await leases.release(taken.lease);
        const again = (await store.acquireAndRead('l-read', TTL))!;
        expect(fenceAfter(again.lease.fence, taken.lease.fence)).toBe(true);
        expect(again.read!.load()).toStrictEqual(update.envelope);
      });

      it('reads nothing for a task never saved, and the reason of a quarantined one', async (context) => {
        const store = readingOrSkip(context);
        const none = (await store.acquireAndRead('l-none', TTL))!;
        expect(none.read!.load()).toBeNull();
        expect(none.read!.quarantined).toBeNull();
        await store.save(createRequest('l-quarantined'));
        await store.quarantine('l-quarantined', 'a reason');
        const quarantined = (await store.acquireAndRead('l-quarantined', TTL))!;
        expect(quarantined.read!.quarantined).toBe('a reason');
        expect(quarantined.read!.load()).toStrictEqual(await store.load('l-quarantined'));
      });

      it('leaves the reads to a subclass that overrides load or quarantined', async (context) => {
        const store = readingOrSkip(context);
        await store.save(createRequest('l-sub'));
        // An object whose prototype is the store: its own `load` stands for a subclass's override.
        const sub = Object.create(store) as typeof store;
        sub.load = async () => null;
        const taken = (await sub.acquireAndRead('l-sub', TTL))!;
        expect(taken.lease).toMatchObject({ taskId: 'l-sub' });
        expect(taken.read).toBeNull();
      });
    });
  });
}
