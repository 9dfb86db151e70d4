/**
 * FileStore erasure beyond the shared contract: the order of its steps and what a crash between them leaves, the
 * temp files a crashed write leaves, directories it cannot attribute, and other processes (instances) sharing the
 * directory.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TaskErasedError } from '../src/errors.js';
import { FileStore, taskDirectoryName } from '../src/store/file/fileStore.js';
import { T0, createRequest, marker, nextRequest } from './support/envelopes.js';
import { fileRaw } from './support/rawDumps.js';
import { advance, createTask } from './support/storeContract.js';

const GDPR = { reason: 'gdpr_erasure', at: T0 + 1, by: 'dpo-7' };
let root: string;
let store: FileStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'file-erasure-'));
  store = new FileStore(join(root, 'tasks'));
});
afterEach(async () => {
  await store.close();
  await rm(root, { recursive: true, force: true });
});

const file = (taskId: string, name: string) => join(store.taskDirectory(taskId), name);

describe('FileStore erasure', () => {
  it('keeps only the tombstone record in the task directory', async () => {
    const first = await createTask(store, 't-files');
    await advance(store, first, { audit: [marker(1)], transcript: [marker(2)] });
    await store.quarantine('t-files', 'test');
    await store.erase('t-files', GDPR);
    expect(await readdir(store.taskDirectory('t-files'))).toEqual(['envelope.json']);
    const record = JSON.parse(await readFile(file('t-files', 'envelope.json'), 'utf8'));
    expect(record).toStrictEqual({ format: 'file-tombstone/1', tombstone: await store.tombstone('t-files') });
  });

  describe('after a crash between the tombstone and the removal of the journals', () => {
    /** An erasure that stopped right after its commit point: the tombstone is there, and so are the journals. */
    async function crashedErasure(secret: string) {
      const first = await createTask(store, 't-crash', { input: { goal: secret } });
      await advance(store, first, { audit: [marker(1, { secret })] });
      const journals = {
        audit: await readFile(file('t-crash', 'audit.jsonl'), 'utf8'),
        transcript: await readFile(file('t-crash', 'transcript.jsonl'), 'utf8'),
      };
      const tombstone = await store.erase('t-crash', GDPR);
      await writeFile(file('t-crash', 'audit.jsonl'), journals.audit);
      await writeFile(file('t-crash', 'transcript.jsonl'), journals.transcript);
      // A temp file of a crashed envelope write holds envelope text too.
      await writeFile(file('t-crash', `.envelope.json.4242.abcdef.tmp`), journals.audit);
      return tombstone;
    }

    const holding = async (secret: string) =>
      (await fileRaw(store).dump()).filter((e) => e.text.includes(secret)).map((e) => e.location);

    it('answers as erased everywhere although the journal bytes are still on disk', async () => {
      await crashedErasure('CRASH-SECRET');
      await expect(store.load('t-crash')).rejects.toBeInstanceOf(TaskErasedError);
      expect(await store.readJournal('t-crash', 'audit')).toEqual([]);
      expect(await store.list()).toEqual([]);
      await expect(store.save(createRequest('t-crash'))).rejects.toBeInstanceOf(TaskErasedError);
      expect((await holding('CRASH-SECRET')).length).toBeGreaterThan(0);
    });

    it('completes on the next erase of the id, returning the first tombstone', async () => {
      const tombstone = await crashedErasure('CRASH-SECRET');
      expect(await store.erase('t-crash', { reason: 'retry', at: T0 + 99 })).toStrictEqual(tombstone);
      expect(await holding('CRASH-SECRET')).toEqual([]);
      expect(await readdir(store.taskDirectory('t-crash'))).toEqual(['envelope.json']);
    });

    it('completes on the next retention sweep, even without retention periods', async () => {
      await crashedErasure('CRASH-SECRET');
      expect(await store.sweepRetention()).toStrictEqual({ erased: [], tombstonesRemoved: 0, more: false });
      expect(await holding('CRASH-SECRET')).toEqual([]);
    });
  });

  it('leaves a task whole when the erasure never reached its commit point', async () => {
    const envelope = await createTask(store, 't-early');
    // What a crash inside writeFileAtomic leaves: a temp file beside the untouched record.
    await writeFile(file('t-early', '.envelope.json.1.aa.tmp'), '{"format":"file-tombstone/1"');
    expect(await store.load('t-early')).toStrictEqual(envelope);
    expect(await store.tombstone('t-early')).toBeNull();
  });

  it('erases a task whose record is not even JSON, by id', async () => {
    await createTask(store, 't-garbled');
    await writeFile(file('t-garbled', 'envelope.json'), '{"format":"file-task/1",');
    const tombstone = await store.erase('t-garbled', GDPR);
    expect(tombstone.removed).toMatchObject({ snapshot: true });
    expect(await readdir(store.taskDirectory('t-garbled'))).toEqual(['envelope.json']);
  });

  it('reports directories whose owner it cannot read when erasing by user, and leaves them', async () => {
    await createTask(store, 't-mine');
    await createTask(store, 't-unreadable');
    await writeFile(file('t-unreadable', 'envelope.json'), 'garbage');
    // Journals of a first save that crashed before its record: someone's data, but whose?
    await mkdir(store.taskDirectory('t-orphan'), { recursive: true });
    await writeFile(file('t-orphan', 'audit.jsonl'), '{"kind":"task_started"}\n');
    // A quarantine marker alone holds nothing of a user.
    await store.quarantine('t-marker-only', 'x');
    const result = await store.eraseUser({ tenantId: 'acme', userId: 'E17' }, GDPR);
    expect(result.erased.map((t) => t.taskId)).toEqual(['t-mine']);
    expect(result.unreadable.sort()).toEqual([taskDirectoryName('t-orphan'), taskDirectoryName('t-unreadable')].sort());
    expect(await readFile(file('t-unreadable', 'envelope.json'), 'utf8')).toBe('garbage');
  });

  it('removes the directory with the tombstone when the tombstone’s period is over', async () => {
    const kept = new FileStore(store.directory, { retention: { tombstoneMs: 10 } });
    await createTask(kept, 't-dir');
    await kept.erase('t-dir', { reason: 'gdpr_erasure', at: T0 });
    expect((await kept.sweepRetention(T0 + 10)).tombstonesRemoved).toBe(1);
    await expect(stat(kept.taskDirectory('t-dir'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses the saves of another instance (another process) after the erasure', async () => {
    const other = new FileStore(store.directory);
    const first = await createTask(other, 't-shared');
    await store.erase('t-shared', GDPR);
    await expect(other.save(nextRequest(first))).rejects.toBeInstanceOf(TaskErasedError);
    await expect(other.quarantine('t-shared', 'x')).rejects.toBeInstanceOf(TaskErasedError);
    expect(await readdir(store.taskDirectory('t-shared'))).toEqual(['envelope.json']);
  });
});
