import { afterAll, describe, expect, it, vi } from 'vitest';

/**
 * zod before 4.6 has no `z.compile` (the peer range is ^4.0.0): the envelope check then stays on the interpreter,
 * and finds that out once, not again on every read (measured before the fix: every read from the 17th on rebuilt
 * the schema for the compiler again, ~1.4 ms a read on top of the interpreter's ~0.2 to 0.5 ms).
 *
 * The unit tests share one module graph, so zod is replaced for this file's own fresh copy of the library alone
 * (`doMock` after `resetModules`) and put back for the files after it.
 */
const attempts = { rebuilds: 0 };

async function libraryWithoutCompile() {
  vi.resetModules();
  vi.doMock('zod', async (importOriginal) => {
    const actual = await importOriginal<typeof import('zod')>();
    const z = {
      ...actual.z,
      // What zod 4.6 brought for compiling, absent before.
      compile: undefined,
      INVALID: undefined,
      core: { ...actual.z.core, compileFn: undefined },
      clone: (...args: Parameters<typeof actual.z.clone>) => {
        attempts.rebuilds += 1;
        return actual.z.clone(...args);
      },
    };
    return { ...actual, z };
  });
  const envelope = await import('../src/store/envelope.js');
  const { createRequest } = await import('./support/envelopes.js');
  return { ...envelope, createRequest };
}

afterAll(() => {
  vi.doUnmock('zod');
  vi.resetModules();
});

describe('the envelope check with a zod that cannot compile', () => {
  it('reads with the interpreter and tries to build the compiled check only once', async () => {
    const { envelopeChecks, parseEnvelope, createRequest } = await libraryWithoutCompile();
    const text = JSON.stringify(createRequest('t-old-zod', { state: 'running', wakeAt: 1_700_000_600_000 }).envelope);
    const expected = envelopeChecks.full(JSON.parse(text)).data;
    for (let i = 0; i < 20; i++) expect(parseEnvelope('t-old-zod', text)).toStrictEqual(expected);
    const afterFirstTry = attempts.rebuilds;
    // The schema was rebuilt for the compiler once (on the 17th read), which then was not there.
    expect(afterFirstTry).toBeGreaterThan(0);
    for (let i = 0; i < 20; i++) expect(parseEnvelope('t-old-zod', text)).toStrictEqual(expected);
    expect(envelopeChecks.fast(JSON.parse(text))).toBeNull();
    expect(attempts.rebuilds).toBe(afterFirstTry);
  });
});
