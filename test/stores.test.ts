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
import { describeStoreContract } from './support/storeContract.js';

describeStoreContract('memory', async () => ({ store: new MemoryStore(), cleanup: async () => {} }));

describeStoreContract('file', async () => {
  const root = await mkdtemp(join(tmpdir(), 'file-store-contract-'));
  // A directory that does not exist yet: the store must create it on the first write.
  return { store: new FileStore(join(root, 'tasks')), cleanup: () => rm(root, { recursive: true, force: true }) };
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
