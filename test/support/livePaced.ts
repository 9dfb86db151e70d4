/**
 * The tool and model of the live-event tests (`liveWorker.ts`, and the API instance that serves the stream, which
 * needs the same catalog): a read released one `step()` at a time, and a script of `steps` reads, then an answer.
 */
import { z } from 'zod';
import { reply, scriptedModel } from '../../src/testing/scriptedModel.js';
import { defineTool } from '../../src/tool.js';

/** `paced_read`: each call waits for a `step()` (a step given before a call is kept for it). */
export function pacedRead(onStart: (taskId: string) => void = () => {}) {
  let credits = 0;
  const waiting: (() => void)[] = [];
  const tool = defineTool({
    name: 'paced_read',
    description: 'a read that returns when the test says so',
    effect: 'read',
    scopes: [],
    timeoutMs: 120_000,
    input: z.strictObject({ turn: z.number() }),
    output: z.strictObject({ turn: z.number() }),
    execute: ({ turn }, { signal, taskId }) =>
      new Promise((resolve, reject) => {
        const done = () => resolve({ ok: true as const, value: { turn } });
        onStart(taskId);
        if (credits > 0) {
          credits -= 1;
          return done();
        }
        waiting.push(done);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
  });
  return {
    tool,
    step() {
      const next = waiting.shift();
      if (next) next();
      else credits += 1;
    },
  };
}

/**
 * `steps` calls of `paced_read`, one a turn (each names its turn: the same call again with nothing new observed would
 * stop the task as a loop), then an answer; restart-safe (chosen by turn number).
 */
export function pacedModel(steps: number) {
  return scriptedModel([
    ...Array.from({ length: steps }, () => (v: { turn: number }) => reply.call('paced_read', { turn: v.turn })),
    reply.answer(`read ${steps} times`),
  ]);
}
