import { AgentError } from '../errors.js';

/** A command line that cannot be run as given; the CLIs print its message with their usage and exit 2. */
export class UsageError extends AgentError {
  constructor(message: string) {
    super('usage', message);
  }
}
