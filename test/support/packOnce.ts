/**
 * The package tier's global setup: `npm pack` (which builds) once per run, for every `*.package.test.ts` file, so the
 * consumer files can run side by side without each building the package again (a `tsc` of src/ and machines/).
 *
 * The pack starts here, in vitest's main process, and is not awaited: the global setups of all the projects run before
 * any test file starts, so an awaited pack would hold back every tier. It writes `pack.json` (its exit code and
 * output) into the directory it packs into once it ended; `packedTarball()` (test/support/consumer.ts) waits for that
 * file. The teardown stops a pack still running (its whole process group, by id) and removes the directory.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where `npm pack` writes the tarball and then `pack.json`. */
    packDir: string;
  }
}

/** What `pack.json` holds. */
export interface PackResult {
  code: number | null;
  signal: string | null;
  out: string;
  err: string;
}

const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export default function setup(project: TestProject): () => Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'packed-'));
  // Its own process group: npm runs the build (tsx, tsc) in children, and the teardown stops them all.
  const child = spawn('npm', ['pack', '--pack-destination', dir, '--loglevel=error'], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const ended = new Promise<void>((resolve) => {
    let written = false;
    const write = (result: PackResult) => {
      if (written) return;
      written = true;
      // Written whole, then renamed: a reader never sees half of it.
      writeFileSync(join(dir, 'pack.json.part'), JSON.stringify(result));
      renameSync(join(dir, 'pack.json.part'), join(dir, 'pack.json'));
      resolve();
    };
    child.once('error', (error) => write({ code: null, signal: null, out, err: `${err}\n${error.message}` }));
    child.once('close', (code, signal) => write({ code, signal, out, err }));
  });
  project.provide('packDir', dir);
  return async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await ended;
    rmSync(dir, { recursive: true, force: true });
  };
}
