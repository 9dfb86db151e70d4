/**
 * `npm run step -- <task> --inspect`: the task stepped in the terminal is watched live in the Stately inspector at
 * the same time, as one actor (`task:<taskId>`), through a relay on 127.0.0.1 that the CLI releases when it quits.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { REFUND_GOAL, REFUND_SUCCESS, refundScript } from '../examples/booking/scenarios.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { stateValueOf } from '../src/inspect/stepFrames.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { SUPPORT, harness } from './support/harness.js';
import { openViewer } from './support/statelyViewer.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const pool = new ChildPool();
afterEach(() => pool.killAll());
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'step-inspect-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('step CLI --inspect', () => {
  it(
    'streams the stepped task to the Stately relay as one actor, shows `at N` there, then releases the relay',
    async () => {
      const { orchestrator } = harness({ store: new FileStore(dir), script: refundScript() });
      const status = await orchestrator.run({
        principal: SUPPORT,
        goal: REFUND_GOAL,
        success: REFUND_SUCCESS,
        taskId: 'refund-inspect',
      });
      expect(status.state).toBe('waiting_for_confirmation');
      const atThree = replayAudit(await orchestrator.audit('refund-inspect'), 3);
      await orchestrator.close();

      const child = pool.spawnTs('step', 'src/cli/step.ts', [
        'refund-inspect',
        '--host',
        './examples/booking/host.ts',
        '--data-dir',
        dir,
        '--inspect',
        '--inspect-port',
        '0',
      ]);
      const line = await child.waitFor('Stately inspector: open ', 20_000);
      const pageUrl = /http:\/\/127\.0\.0\.1:\d+\/\?key=[\w-]+/.exec(line)![0];
      await child.waitFor('events ', 20_000);
      const viewer = await openViewer(pageUrl);
      const frames = viewer.frames as {
        type: string;
        sessionId: string;
        event?: { type: string; step?: number };
        snapshot?: { value?: unknown; context?: { step?: number } };
      }[];
      const closed = viewer.closed;
      // Back to step 3 of the journal: the inspector's task actor shows it.
      child.send('at 3');
      await child.waitFor('inspector  task:refund-inspect shows step 3', 20_000);
      // The 999.00 is rejected; the model proposes 199.00 at the next turn.
      child.send('reject the customer asked for 199.00');
      child.send('next');
      child.send('quit');
      expect((await child.ended(20_000)).code, child.transcript()).toBe(0);
      // The CLI released the relay: the viewer was disconnected.
      await closed;
      const roots = frames.filter(
        (f) => f.type === '@xstate.actor' && !('parentId' in f && (f as { parentId?: string }).parentId),
      );
      expect(new Set(roots.map((f) => f.sessionId))).toEqual(new Set(['task:refund-inspect']));
      const values = frames
        .filter((f) => f.type === '@xstate.snapshot' && f.sessionId === 'task:refund-inspect')
        .map((f) => JSON.stringify(f.snapshot!.value));
      expect(values).toContain(JSON.stringify({ executing: 'awaitingConfirmation' }));
      expect(values).toContain(JSON.stringify('thinking'));
      const stepped = frames.filter((f) => f.event?.type === 'inspect.step');
      expect(stepped).toHaveLength(1);
      expect(stepped[0]).toMatchObject({
        type: '@xstate.snapshot',
        sessionId: 'task:refund-inspect',
        event: { step: 3 },
        snapshot: { value: stateValueOf(atThree.state), context: { step: 3 } },
      });
    },
    scaled(60_000),
  );
});
