/** Opens the store a CLI asked for: file (default), memory, or redis. */
import { AgentError } from '../errors.js';
import { MemoryStore } from '../store/memoryStore.js';
import type { TaskStore } from '../store/taskStore.js';

export async function openStore(kind: string, options: { dataDir: string; prefix?: string }): Promise<TaskStore> {
  switch (kind) {
    case 'memory':
      return new MemoryStore();
    case 'file': {
      const { FileStore } = await import('../store/file/fileStore.js');
      return new FileStore(options.dataDir);
    }
    case 'redis': {
      const { RedisStore } = await import('../store/redis/redisStore.js');
      return new RedisStore({ prefix: options.prefix });
    }
    default:
      throw new AgentError('invalid_option', `unknown store "${kind}"; use file, memory or redis`);
  }
}
