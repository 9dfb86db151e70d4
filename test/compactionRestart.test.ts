/**
 * A task stopped while `compacting` (its summary persisted as asked, not yet written) resumes in another process:
 * the summariser is asked again, the compaction is recorded once, and nothing stays reserved.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../machines/journal.js';
import type { AgentModel } from '../src/model/agentModel.js';
import type { HostSummariser } from '../src/model/summariser.js';
import { MemoryStore, createOrchestrator, defineTool } from '../src/index.js';
import { reply } from '../src/testing/index.js';
import { E17 } from './support/harness.js';

const readPage = defineTool({
  name: 'read_page',
  description: 'Reads one page. Read-only.',
  effect: 'read',
  scopes: [],
  input: z.strictObject({ page: z.number().int() }),
  output: z.strictObject({ page_id: z.string(), text: z.string() }),
  timeoutMs: 1_000,
  async execute(args) {
    return { ok: true, value: { page_id: `PG-${args.page}`, text: 'lorem ipsum dolor sit amet '.repeat(20) } };
  },
});

/** Reads pages 1..rounds, then answers. */
const reader = (rounds: number): AgentModel => ({
  name: 'reader',
  async decide(request) {
    const results = (await request.transcript()).filter((e) => e.kind === 'result').length;
    return results < rounds
      ? reply.call('read_page', { page: results + 1 }, `c${results + 1}`)
      : reply.answer(`Read ${results} pages.`);
  },
});

const orchestrator = (store: MemoryStore, summarise: HostSummariser) =>
  createOrchestrator({ tools: [readPage], model: reader(8), store, compaction: { atTokens: 600, summarise } });

describe('compacting, restarted', () => {
  it('asks the summariser again after a restart and records the compaction once', async () => {
    const store = new MemoryStore();
    let asked!: () => void;
    const stuck = new Promise<void>((resolve) => (asked = resolve));
    const first = orchestrator(store, () => {
      asked();
      return new Promise<string>(() => {});
    });
    await first.start({ principal: E17, goal: 'Read the pages.', taskId: 'cr-1' });
    await stuck;
    const mid = await first.status('cr-1');
    expect(mid.state).toBe('running');
    await first.close();

    const second = orchestrator(store, (older) => `${older.length} entries of page reads.`);
    await second.resume('cr-1');
    const status = await second.settled('cr-1');
    expect(status.state).toBe('answered');
    const audit = (await second.audit('cr-1')) as AuditEntry[];
    const started = audit.filter((e) => e.kind === 'compaction_started');
    const done = audit.filter((e) => e.kind === 'compaction');
    expect(done.length).toBeGreaterThan(0);
    expect(done[0]).toMatchObject({ source: 'host', fallback: null });
    expect(started.length).toBe(done.length);
    await second.close();
  });
});
