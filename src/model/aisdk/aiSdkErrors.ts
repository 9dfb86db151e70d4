/**
 * Failures of an AI SDK call sorted into what the runtime expects, by the taxonomy every adapter shares
 * (providerErrors.ts): TransientModelError to retry within the task's retry budget, AiSdkRequestError (with its
 * specific code) to fail the task, a refused model output (re-asked, nothing charged), or "unusable output" when the
 * provider answered 2xx with something nobody can use. Messages carry no stack, no URL and nothing key-like.
 */
import { aiSdk } from '../../peers/aiSdk.js';
import { type ModelReply, TransientModelError } from '../agentModel.js';
import { maskedLine } from '../replyRules.js';
import { ProviderRequestError, classifyProviderError, settleProviderError } from '../providerErrors.js';
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

/**
 * The provider refused the request for a reason a retry cannot fix; `code` says which: `model_auth_failed`,
 * `model_not_found`, `context_too_long`, or `model_request_failed` (a bad request, the configuration).
 */
export class AiSdkRequestError extends ProviderRequestError {}

/** The request's signal was aborted (timeout or cancellation): nothing to retry from here. */
export class AiSdkAbortedError extends Error implements CodedError<'model_request_aborted'> {
  readonly code = 'model_request_aborted' as const;
  constructor() {
    super('the model request was aborted');
    this.name = new.target.name;
  }
}

export type Classified =
  | { kind: 'unusable'; detail: string }
  /** The provider refused the model's own output (Groq's tool_use_failed): re-asked, nothing charged. */
  | { kind: 'reply'; reply: ModelReply }
  | { kind: 'error'; error: Error };

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
    const headers = Object.entries(error.responseHeaders ?? {});
    const classified = classifyProviderError(
      {
        status,
        // The raw body keeps every field; the provider's parsed `data` (or the message) when there is none.
        body: error.responseBody ?? error.data ?? (status === null ? null : error.message),
        header: (name) => headers.find(([key]) => key.toLowerCase() === name)?.[1],
      },
      { secrets: options.secrets, maxRetryAfterMs: options.maxRetryAfterMs },
    );
    const settled = settleProviderError(classified, {
      who: 'model provider',
      hints: STATUS_HINT,
      refusal: AiSdkRequestError,
      unreachable: detail(),
    });
    return 'reply' in settled ? { kind: 'reply', reply: settled.reply } : { kind: 'error', error: settled.error };
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
