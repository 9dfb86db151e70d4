/**
 * Failures of an AI SDK call sorted into what the runtime expects: TransientModelError to retry within the task's
 * retry budget, AiSdkRequestError to fail the task, or "unusable output" when the provider answered with something
 * nobody can use (the adapter turns that into an invalid reply, which the machine re-asks). Messages carry no
 * stack, no URL and nothing key-like.
 */
import { aiSdk } from '../../peers/aiSdk.js';
import { AgentError } from '../../errors.js';
import { TransientModelError } from '../agentModel.js';
import { isTransientStatus, maskedLine, retryAfterMs } from '../replyRules.js';
import type { CodedError } from '../../errorCodes.js';

const {
  APICallError,
  AISDKError,
  EmptyResponseBodyError,
  InvalidResponseDataError,
  JSONParseError,
  LoadAPIKeyError,
  LoadSettingError,
  NoContentGeneratedError,
  RetryError,
  TypeValidationError,
} = aiSdk;

/** The provider refused the request for a reason a retry cannot fix (bad request, key, model id, configuration). */
export class AiSdkRequestError extends AgentError<'model_request_failed'> {
  constructor(
    readonly status: number | null,
    message: string,
  ) {
    super('model_request_failed', message);
  }
}

/** The request's signal was aborted (timeout or cancellation): nothing to retry from here. */
export class AiSdkAbortedError extends Error implements CodedError<'model_request_aborted'> {
  readonly code = 'model_request_aborted' as const;
  constructor() {
    super('the model request was aborted');
    this.name = new.target.name;
  }
}

export type Classified = { kind: 'unusable'; detail: string } | { kind: 'error'; error: Error };

export interface ErrorOptions {
  /** Longest Retry-After honoured, in ms; a provider asking for longer is retried sooner. */
  maxRetryAfterMs: number;
  /** Values to mask in messages (the API key the provider was given, if the host knows it). */
  secrets: readonly string[];
}

const STATUS_HINT: Record<number, string> = {
  400: 'bad request',
  401: "authentication failed: check the provider's API key",
  403: 'permission denied for this key or model',
  404: 'not found: check the model id and the provider base URL',
  422: 'unprocessable request',
};

export function classifyError(error: unknown, signal: AbortSignal, options: ErrorOptions): Classified {
  if (signal.aborted || isAbort(error)) return { kind: 'error', error: new AiSdkAbortedError() };
  // With maxRetries 0 the SDK throws the error itself; unwrap a RetryError all the same.
  if (RetryError.isInstance(error)) return classifyError(error.lastError, signal, options);
  const detail = () => maskedLine(error instanceof Error ? error.message : String(error), options.secrets);
  if (APICallError.isInstance(error)) {
    const status = typeof error.statusCode === 'number' ? error.statusCode : null;
    // The server answered 2xx with a body the provider could not read (not JSON, not the expected shape).
    if (status !== null && status >= 200 && status < 300) {
      return { kind: 'unusable', detail: `the provider's response could not be read (${detail()})` };
    }
    if (error.isRetryable || (status !== null && isTransientStatus(status))) {
      const headers = Object.entries(error.responseHeaders ?? {});
      const retryAfter = retryAfterMs((name) => headers.find(([key]) => key.toLowerCase() === name)?.[1]);
      const what =
        status === null
          ? `the model provider could not be reached: ${detail()}`
          : `the model provider answered ${status}: ${detail()}`;
      return {
        kind: 'error',
        error: new TransientModelError(
          what,
          retryAfter === undefined ? undefined : Math.min(retryAfter, options.maxRetryAfterMs),
        ),
      };
    }
    const hint = status === null ? 'request refused' : (STATUS_HINT[status] ?? 'request refused');
    return {
      kind: 'error',
      error: new AiSdkRequestError(
        status,
        `The model provider answered ${status ?? 'without a status'} (${hint}): ${detail()}.`,
      ),
    };
  }
  // Other provider errors that say so (e.g. the gateway's), duck-typed on the SDK's own flag.
  if (AISDKError.isInstance(error) && (error as { isRetryable?: unknown }).isRetryable === true) {
    return { kind: 'error', error: new TransientModelError(`the model provider failed: ${detail()}`) };
  }
  if (
    JSONParseError.isInstance(error) ||
    TypeValidationError.isInstance(error) ||
    InvalidResponseDataError.isInstance(error) ||
    EmptyResponseBodyError.isInstance(error) ||
    NoContentGeneratedError.isInstance(error)
  ) {
    return { kind: 'unusable', detail: `the provider's response could not be used (${error.name}: ${detail()})` };
  }
  if (LoadAPIKeyError.isInstance(error) || LoadSettingError.isInstance(error)) {
    return { kind: 'error', error: new AiSdkRequestError(null, `The model provider is not configured: ${detail()}`) };
  }
  const name = error instanceof Error ? error.name : typeof error;
  return {
    kind: 'error',
    error: new AiSdkRequestError(null, `The model request failed unexpectedly (${name}): ${detail()}`),
  };
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}
