/** Loads an optional peer dependency when a function that needs it is called, or says what to install. */
import { AgentError } from '../errors.js';

export async function optionalPeer<T>(name: string, load: () => Promise<T>, who: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new AgentError('missing_peer', `${who} needs the optional peer dependency ${name}: npm install ${name}`, {
        cause: error,
      });
    }
    throw error;
  }
}
