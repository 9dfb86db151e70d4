/**
 * The child-process helpers of test/support/workers.ts: what a failure message shows of a child (both streams, how it
 * ended), and a command that does not end in time is reported with its output and killed.
 */
import { describe, expect, it } from 'vitest';
import { runCommand } from './support/workers.js';

describe('runCommand', () => {
  it('returns the exit, both outputs, and a transcript holding them all', async () => {
    const script =
      "console.log('the reason, on stdout'); process.stdout.write('a last line without newline'); console.error('a stack, on stderr'); process.exit(3)";
    const run = await runCommand(process.execPath, ['-e', script], { name: 'failing child' });
    expect(run).toMatchObject({
      code: 3,
      signal: null,
      out: 'the reason, on stdout\na last line without newline',
      err: 'a stack, on stderr\n',
    });
    expect(run.transcript).toMatch(/^--- failing child \(pid \d+, exited \{"code":3,"signal":null\}\) stdout\n/);
    for (const part of [
      'the reason, on stdout',
      'a last line without newline',
      '--- failing child stderr\na stack, on stderr',
      '--- end of failing child',
    ]) {
      expect(run.transcript).toContain(part);
    }
  });

  it('reports a command that does not end in time with what it printed, and kills it', async () => {
    const script = 'setInterval(() => {}, 1000)';
    const error = (await runCommand(process.execPath, ['-e', script], { name: 'hanging child', timeoutMs: 500 }).catch(
      (e: unknown) => e,
    )) as Error;
    expect(error.message).toMatch(
      /^hanging child did not exit within \d+ ms\n--- hanging child \(pid \d+, still running\) stdout\n/,
    );
    expect(error.message).toContain('--- end of hanging child');
    const pid = Number(/\(pid (\d+), still running\)/.exec(error.message)![1]);
    expect(() => process.kill(pid, 0)).toThrow();
  });
});
