import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentMachine } from '../machines/agentMachine.js';
import { unrestorableReason } from '../src/runtime/restore.js';
import { TASK_STATES, parseEnvelope } from '../src/store/envelope.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { createRequest, nextRequest } from './support/envelopes.js';
import { fileRaw, memoryRaw } from './support/rawDumps.js';
import { describeStoreContract } from './support/storeContract.js';

describeStoreContract('memory', async (options) => {
  const store = new MemoryStore(options ?? {});
  return { store, cleanup: async () => {}, raw: memoryRaw(store) };
});

describeStoreContract('file', async (options) => {
  const root = await mkdtemp(join(tmpdir(), 'file-store-contract-'));
  const cleanup = () => rm(root, { recursive: true, force: true });
  try {
    // A directory that does not exist yet: the store must create it on the first write.
    const store = new FileStore(join(root, 'tasks'), options);
    return { store, cleanup, raw: fileRaw(store) };
  } catch (error) {
    await cleanup();
    throw error;
  }
});

describe('test envelopes', () => {
  it.each(TASK_STATES)('are valid and restorable in state %s', (state) => {
    const created = createRequest(`t-${state}`, { state }).envelope;
    const updated = nextRequest(created, { state }).envelope;
    for (const envelope of [created, updated]) {
      expect(parseEnvelope(envelope.taskId, JSON.stringify(envelope))).toStrictEqual(envelope);
      expect(envelope.summary.state).toBe(state);
      expect(unrestorableReason(agentMachine, envelope)).toBeNull();
    }
  });
});
