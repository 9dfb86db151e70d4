/** What every CLI here does with its result: the exit code, usage errors with the help text, errors in one line. */
import { AgentError, TaskNotFoundError } from '../errors.js';

/** A command line that cannot be run as given: printed with the usage, exit code 2. */
export class UsageError extends AgentError<'usage'> {
  constructor(message: string) {
    super('usage', message);
  }
}

/** Runs a CLI's main and sets the process exit code: 0/1 from main, 2 for usage errors, 1 for failures. */
export function runCli(main: () => Promise<number>, help: string): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      const badArguments = error instanceof Error && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS');
      if (error instanceof UsageError || badArguments) {
        console.error(`${(error as Error).message}\n\n${help}`);
        process.exitCode = 2;
        return;
      }
      if (error instanceof TaskNotFoundError) {
        console.error(
          `${error.message.replace(/\.$/, '')}. Is it in another store? Pass --store, --data-dir or --prefix (see --help).`,
        );
        process.exitCode = 1;
        return;
      }
      console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
      process.exitCode = 1;
    },
  );
}
