import { spawnSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CorruptTaskError,
  RevisionConflictError,
  StoreUnavailableError,
  UnsupportedVersionError,
} from '../src/errors.js';
import { FileStore, taskDirectoryName } from '../src/store/file/fileStore.js';
import { T0, createRequest, marker, nextRequest } from './support/envelopes.js';
import { advance, createTask } from './support/storeContract.js';

let root: string;
let store: FileStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'file-store-'));
  store = new FileStore(join(root, 'tasks'));
});
afterEach(async () => {
  await store.close();
  await rm(root, { recursive: true, force: true });
});

/** Every file under `dir`, as paths relative to it. */
async function walk(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

function taskFile(taskId: string, name: string): string {
  return join(store.taskDirectory(taskId), name);
}

async function lineCount(path: string): Promise<number> {
  return (await readFile(path, 'utf8')).split('\n').length - 1;
}

describe('FileStore', () => {
  it('creates its directory on the first write, not before', async () => {
    expect(await store.list()).toEqual([]);
    await expect(stat(store.directory)).rejects.toMatchObject({ code: 'ENOENT' });
    await createTask(store, 't1');
    expect((await stat(store.directory)).isDirectory()).toBe(true);
  });

  describe('after a crash between the journal append and the envelope replace', () => {
    it('ignores uncommitted journal lines and truncates them on the next save', async () => {
      const first = await createTask(store, 't-crash');
      const auditPath = taskFile('t-crash', 'audit.jsonl');
      // What a save that died before its rename leaves behind: whole lines and a torn one.
      await appendFile(auditPath, `${JSON.stringify(marker(666))}\n{"torn": tr`);
      await appendFile(taskFile('t-crash', 'transcript.jsonl'), `${JSON.stringify(marker(667))}\n`);

      expect(await store.readJournal('t-crash', 'audit')).toHaveLength(first.journal.audit);
      expect(await store.readJournal('t-crash', 'audit', 0, 1_000)).not.toContainEqual(marker(666));
      expect(await store.load('t-crash')).toStrictEqual(first);

      const second = await advance(store, first, { audit: [marker(1)], transcript: [marker(2)] });
      expect(await store.readJournal('t-crash', 'audit')).toHaveLength(second.journal.audit);
      expect((await store.readJournal('t-crash', 'audit')).at(-1)).toStrictEqual(marker(1));
      expect((await store.readJournal('t-crash', 'transcript')).at(-1)).toStrictEqual(marker(2));
      expect(await lineCount(auditPath)).toBe(second.journal.audit);
      expect(await lineCount(taskFile('t-crash', 'transcript.jsonl'))).toBe(second.journal.transcript);
      expect(await readFile(auditPath, 'utf8')).not.toContain('torn');
    });

    it('treats journals without an envelope as a task that was never created', async () => {
      await mkdir(store.taskDirectory('t-unborn'), { recursive: true });
      await writeFile(taskFile('t-unborn', 'audit.jsonl'), `${JSON.stringify(marker(666))}\n`);
      expect(await store.load('t-unborn')).toBeNull();
      expect(await store.list()).toEqual([]);
      const request = createRequest('t-unborn');
      await store.save(request);
      expect(await store.readJournal('t-unborn', 'audit')).toStrictEqual(request.append.audit);
    });

    it('reports a journal shorter than its committed length as corruption, on read and on save', async () => {
      const first = await createTask(store, 't-short');
      await writeFile(taskFile('t-short', 'audit.jsonl'), '');
      await expect(store.readJournal('t-short', 'audit')).rejects.toThrow(
        /audit\.jsonl is shorter than its committed length/,
      );
      await expect(store.save(nextRequest(first))).rejects.toBeInstanceOf(CorruptTaskError);
    });
  });

  describe('with a damaged envelope.json', () => {
    const cases: [string, (raw: string, other: string) => string, RegExp][] = [
      ['garbage', () => 'not json at all \u0000', /envelope\.json is not JSON/],
      ['a truncated file', (raw) => raw.slice(0, Math.floor(raw.length / 2)), /envelope\.json is not JSON/],
      ['valid JSON of the wrong shape', () => '{"hello":"world"}', /is not a file-store task record \(at format/],
      [
        'a wrong-typed field',
        (raw) => raw.replace('"revision":1,', '"revision":"1",'),
        /invalid envelope at revision: .*expected number/i,
      ],
      ['the envelope of another task', (_raw, other) => other, /belongs to task "t-healthy"/],
    ];

    it.each(cases)(
      'refuses %s with CorruptTaskError and keeps serving the other tasks',
      async (_label, damage, message) => {
        const healthy = await createTask(store, 't-healthy');
        const damaged = await createTask(store, 't-damaged');
        const path = taskFile('t-damaged', 'envelope.json');
        await writeFile(
          path,
          damage(await readFile(path, 'utf8'), await readFile(taskFile('t-healthy', 'envelope.json'), 'utf8')),
        );

        const error = await store.load('t-damaged').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CorruptTaskError);
        expect((error as Error).message).toMatch(message);
        await expect(store.save(nextRequest(damaged))).rejects.toBeInstanceOf(CorruptTaskError);
        expect(await store.load('t-healthy')).toStrictEqual(healthy);
        expect((await store.list()).map((s) => s.taskId)).toEqual(['t-healthy']);
        await store.quarantine('t-damaged', (error as Error).message);
        expect(await store.quarantined('t-damaged')).toMatch(message);
      },
    );

    it('refuses an envelope of an unknown schema version with UnsupportedVersionError', async () => {
      await createTask(store, 't-future');
      const path = taskFile('t-future', 'envelope.json');
      await writeFile(path, (await readFile(path, 'utf8')).replace('"schemaVersion":1', '"schemaVersion":9'));
      await expect(store.load('t-future')).rejects.toBeInstanceOf(UnsupportedVersionError);
    });

    it('reports an I/O failure as StoreUnavailableError, not as a missing task', async () => {
      await mkdir(store.taskDirectory('t-io'), { recursive: true });
      await mkdir(taskFile('t-io', 'envelope.json'));
      await expect(store.load('t-io')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.save(createRequest('t-io'))).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });

  describe('task ids', () => {
    const ids = [
      'a/b',
      '../escape',
      '..',
      '.',
      'x/../../y',
      '/abs',
      'C:\\win',
      'ünïcødé 日本 🚀',
      'A',
      'a',
      'x'.repeat(600),
    ];

    it('keeps every task in its own directory inside the root', async () => {
      for (const id of ids) await createTask(store, id);
      expect(await readdir(root)).toEqual(['tasks']);
      const names = await readdir(store.directory);
      expect(new Set(names).size).toBe(ids.length);
      for (const name of names) {
        expect(name).toMatch(/^[A-Za-z0-9_-]{1,48}~[0-9a-f]{32}$/);
        expect(Buffer.byteLength(name)).toBeLessThan(255);
      }
      for (const file of await walk(store.directory)) expect(file.split(sep)).toHaveLength(2);
      for (const id of ids) expect((await store.load(id))?.taskId).toBe(id);
      expect((await store.list()).map((s) => s.taskId).sort()).toEqual([...ids].sort());
    });

    it('names directories by a hash of the exact id', () => {
      expect(taskDirectoryName('a/b')).not.toBe(taskDirectoryName('a_b'));
      expect(taskDirectoryName('A').toLowerCase()).not.toBe(taskDirectoryName('a').toLowerCase());
      expect(taskDirectoryName('..')).not.toMatch(/^\.+$/);
    });
  });

  it('leaves no temp or lock files behind', async () => {
    let envelope = await createTask(store, 't-clean');
    for (let n = 0; n < 5; n++) envelope = await advance(store, envelope, { audit: [marker(n)] });
    await store.quarantine('t-clean', 'test');
    await store.save(nextRequest(createRequest('t-clean').envelope)).catch(() => undefined);
    expect((await walk(store.directory)).map((f) => f.split(sep)[1]).sort()).toEqual([
      'audit.jsonl',
      'envelope.json',
      'quarantine.json',
      'transcript.jsonl',
    ]);
  });

  it('waits for in-flight saves on close', async () => {
    const request = createRequest('t-close');
    const saving = store.save(request);
    await store.close();
    // Another instance reads the disk only: the save must have landed before close resolved.
    expect(await new FileStore(store.directory).load('t-close')).toStrictEqual(request.envelope);
    await saving;
  });

  it('refuses a journal entry JSON cannot carry with invalid_save, before writing anything', async () => {
    const first = await createTask(store, 't-bigint');
    const before = await readFile(taskFile('t-bigint', 'audit.jsonl'), 'utf8');
    await expect(store.save(nextRequest(first, { audit: [{ amount: 10n }] }))).rejects.toMatchObject({
      code: 'invalid_save',
    });
    expect(await readFile(taskFile('t-bigint', 'audit.jsonl'), 'utf8')).toBe(before);
    expect(await store.load('t-bigint')).toStrictEqual(first);
  });

  it('fails closed on a damaged quarantine record', async () => {
    await createTask(store, 't-qbad');
    await writeFile(taskFile('t-qbad', 'quarantine.json'), '{"reas');
    expect(await store.quarantined('t-qbad')).toMatch(/unreadable/);
  });

  describe('between processes (separate instances share only the lock file)', () => {
    it('lets exactly one of concurrent saves from the same revision win', async () => {
      const first = await createTask(store, 't-shared');
      const others = [1, 2, 3, 4, 5, 6].map(() => new FileStore(store.directory));
      const requests = others.map((_, n) => nextRequest(first, { updatedAt: T0 + n, audit: [marker(n)] }));
      const results = await Promise.allSettled(others.map((other, n) => other.save(requests[n]!)));
      const won = results.flatMap((r, n) => (r.status === 'fulfilled' ? [n] : []));
      expect(won).toHaveLength(1);
      for (const result of results) {
        if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(RevisionConflictError);
      }
      expect(await store.readJournal('t-shared', 'audit', first.journal.audit)).toStrictEqual([marker(won[0]!)]);
      expect(await lineCount(taskFile('t-shared', 'audit.jsonl'))).toBe(first.journal.audit + 1);
    });

    it('waits for a lock held by a live process, then gives up with StoreUnavailableError', async () => {
      const first = await createTask(store, 't-locked');
      const patient = new FileStore(store.directory, { lockTimeoutMs: 150 });
      const lock = taskFile('t-locked', '.lock');
      await writeFile(lock, JSON.stringify({ pid: process.pid, host: hostname(), token: 'x', at: Date.now() }));
      const error = await patient.save(nextRequest(first)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`process ${process.pid}`);
      expect(await store.load('t-locked')).toStrictEqual(first);
      expect(await readFile(lock, 'utf8')).toContain('"token":"x"');
    });

    it('breaks a lock older than the stale limit', async () => {
      const first = await createTask(store, 't-stale-lock');
      const lock = taskFile('t-stale-lock', '.lock');
      await writeFile(lock, JSON.stringify({ pid: process.pid, host: 'elsewhere', token: 'x', at: 0 }));
      const old = new Date(Date.now() - 60_000);
      await utimes(lock, old, old);
      await advance(store, first);
      expect((await store.load('t-stale-lock'))!.revision).toBe(2);
      await expect(stat(lock)).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it('breaks a fresh lock whose holder process on this host is gone', async () => {
      const first = await createTask(store, 't-dead-holder');
      const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
        encoding: 'utf8',
      });
      const deadPid = Number(child.stdout);
      await writeFile(
        taskFile('t-dead-holder', '.lock'),
        JSON.stringify({ pid: deadPid, host: hostname(), token: 'x', at: Date.now() }),
      );
      await advance(store, first, { updatedAt: T0 + 5 });
      expect((await store.load('t-dead-holder'))!.revision).toBe(2);
    });
  });
});
