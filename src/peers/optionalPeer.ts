/** Loads an optional peer dependency when a function that needs it is called, or says what to install. */
import { AgentError } from '../errors.js';

export async function optionalPeer<T>(name: string, load: () => Promise<T>, who: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (isMissing(error, name)) {
      throw new AgentError('missing_peer', `${who} needs the optional peer dependency ${name}: npm install ${name}`, {
        cause: error,
      });
    }
    throw error;
  }
}

/**
 * Node's "cannot find" error about the peer itself. A peer that is installed but broken (one of its own dependencies
 * missing) keeps Node's error: installing the peer again would not fix it.
 */
function isMissing(error: unknown, name: string): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  return typeof message !== 'string' || message.includes(`'${name}'`) || message.includes(`'${name}/`);
}
