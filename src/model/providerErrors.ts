/**
 * One taxonomy of provider failures, shared by every model adapter: what a failed HTTP call to a model provider
 * means, decided from its status and its error body alone (never from the SDK that made the call).
 *
 * - no answer (unreachable, reset, timed out), 408/409, 429 and 5xx are transient: retried within the task's retry
 *   budget, honouring `retry-after(-ms)`, then waited out as an outage (`model_unavailable`);
 * - a 400 about the model's own output (Groq's `tool_use_failed`: "Failed to call a function") is unusable output,
 *   re-asked like any other (`protocol_error` once the re-asks run out);
 * - a prompt longer than the model's context (`context_length_exceeded`, "maximum context length", "prompt is too
 *   long") fails the task with `context_too_long`;
 * - 401/403 fail it with `model_auth_failed`, 404 (or code `model_not_found`) with `model_not_found`, any other
 *   refusal with `model_request_failed`: at once, no retry, no outage wait.
 *
 * The message kept is the provider's status, error code and message, on one line, capped, with keys masked.
 */
import { AgentError } from '../errors.js';
import { type ModelReply, TransientModelError } from './agentModel.js';
import { isTransientStatus, maskedLine, retryAfterMs } from './replyRules.js';

export type ProviderErrorKind =
  | 'unreachable'
  | 'rate_limited'
  | 'server_error'
  | 'model_output'
  | 'context_too_long'
  | 'auth_failed'
  | 'not_found'
  | 'bad_request';

/** The code a refused request fails its task with (a stop code, and the code of the adapter's error). */
export type ProviderRequestCode = 'model_request_failed' | 'model_auth_failed' | 'model_not_found' | 'context_too_long';

export const REQUEST_CODE_OF = {
  context_too_long: 'context_too_long',
  auth_failed: 'model_auth_failed',
  not_found: 'model_not_found',
  bad_request: 'model_request_failed',
} as const satisfies Partial<Record<ProviderErrorKind, ProviderRequestCode>>;

/**
 * The provider refused the request for a reason a retry cannot fix. `code` says which: `model_auth_failed` (401,
 * 403), `model_not_found` (404), `context_too_long`, or `model_request_failed` (any other refusal).
 */
export class ProviderRequestError extends AgentError<ProviderRequestCode> {
  constructor(
    readonly status: number | null,
    message: string,
    code: ProviderRequestCode = 'model_request_failed',
    /** The provider's own error code, when it sent one. */
    readonly providerCode: string | null = null,
  ) {
    super(code, message);
  }
}

/** What a failed call left to judge by: the status (null when no answer came), the body, the headers. */
export interface ProviderFailure {
  status: number | null;
  /** The error body: parsed JSON, or text (parsed here when it is JSON). */
  body: unknown;
  header?: (name: 'retry-after-ms' | 'retry-after') => string | null | undefined;
}

export interface ProviderError {
  kind: ProviderErrorKind;
  transient: boolean;
  status: number | null;
  /** The provider's own error code (`context_length_exceeded`, `invalid_api_key`), when it sent one. */
  providerCode: string | null;
  /** The provider's message: one line, capped, keys masked. */
  message: string;
  /** How long the provider asked to wait (capped by the caller's maximum). */
  retryAfterMs?: number;
}

export interface ClassifyOptions {
  /** Values to mask in messages (the API key the adapter was given). */
  secrets: readonly (string | undefined)[];
  /** Longest Retry-After honoured, in ms. */
  maxRetryAfterMs: number;
}

/** Codes with which a provider refuses what the model generated (its tool call failed the provider's checks). */
const MODEL_OUTPUT_CODES: ReadonlySet<string> = new Set([
  'tool_use_failed',
  'json_validate_failed',
  'invalid_tool_call',
  'tool_call_parse_error',
]);
const MODEL_OUTPUT_MESSAGES = [/failed to call a function/i, /tool call validation failed/i];

/** Codes (or, from llama.cpp, the error `type`) of a prompt longer than the model's context. */
const CONTEXT_CODES: ReadonlySet<string> = new Set([
  'context_length_exceeded',
  'context_window_exceeded',
  'exceed_context_size_error',
]);
/** As OpenAI, DeepSeek, vLLM (and the servers on it), Anthropic, Mistral and llama.cpp word it. */
const CONTEXT_MESSAGES = [
  /maximum context length/i,
  /context length exceeded/i,
  /prompt is too long/i,
  /too large for model with \d+ maximum context length/i,
  /exceeds (?:the )?(?:model'?s? )?(?:available )?context (?:size|window|length)/i,
  /input (?:is )?too long for (?:the )?model/i,
];

/** Codes of a 429 that waiting does not fix: the account's quota or credit is spent. */
const QUOTA_CODES: ReadonlySet<string> = new Set(['insufficient_quota', 'billing_hard_limit_reached']);

export function classifyProviderError(failure: ProviderFailure, options: ClassifyOptions): ProviderError {
  const { status } = failure;
  const { code, type, message } = errorFields(failure.body);
  const said = maskedLine(message, options.secrets);
  const base = { status, providerCode: code, message: said };
  if (status === null) return { ...base, kind: 'unreachable', transient: true };
  const matches = (patterns: RegExp[]) => patterns.some((p) => p.test(message));
  // A context overflow is the same request refused again on every try. A 4xx is read by its code or its words; a 5xx
  // only by its code (llama.cpp sent `exceed_context_size_error` as a 500 before ggml-org/llama.cpp#16486), since a
  // server error's message may echo the user's own text.
  const overflowCode = [code, type].some((c) => c !== null && CONTEXT_CODES.has(c));
  const overflow = overflowCode || (status < 500 && matches(CONTEXT_MESSAGES));
  if (status >= 400 && overflow) return { ...base, kind: 'context_too_long', transient: false };
  if (status >= 400 && status < 500) {
    if (status === 400 && ((code !== null && MODEL_OUTPUT_CODES.has(code)) || matches(MODEL_OUTPUT_MESSAGES))) {
      return { ...base, kind: 'model_output', transient: false };
    }
    if (code === 'model_not_found') return { ...base, kind: 'not_found', transient: false };
  }
  if (status === 429 && code !== null && QUOTA_CODES.has(code))
    return { ...base, kind: 'bad_request', transient: false };
  if (isTransientStatus(status)) {
    const asked = failure.header ? retryAfterMs(failure.header) : undefined;
    return {
      ...base,
      kind: status === 429 ? 'rate_limited' : 'server_error',
      transient: true,
      ...(asked === undefined ? {} : { retryAfterMs: Math.min(asked, options.maxRetryAfterMs) }),
    };
  }
  if (status === 401 || status === 403) return { ...base, kind: 'auth_failed', transient: false };
  if (status === 404) return { ...base, kind: 'not_found', transient: false };
  return { ...base, kind: 'bad_request', transient: false };
}

const KIND_HINT: Record<keyof typeof REQUEST_CODE_OF, string> = {
  context_too_long: "the prompt is longer than the model's context",
  auth_failed: "authentication or permission refused: check the provider's API key and its access to the model",
  not_found: 'not found: check the model id and the provider base URL',
  bad_request: 'request refused',
};

/**
 * The message a refused request fails its task with: the status, the provider's code and message, and a hint (the
 * adapter's own for a status, else the kind's). `who` names the other side ("model server", "model provider").
 */
export function describeRefusal(
  error: ProviderError & { kind: keyof typeof REQUEST_CODE_OF },
  who: string,
  hints: Readonly<Record<number, string>> = {},
): string {
  const status = error.status === null ? 'without a status' : String(error.status);
  const code = error.providerCode ? ` [${error.providerCode}]` : '';
  const byStatus = error.kind !== 'context_too_long' && error.status !== null ? hints[error.status] : undefined;
  const hint = byStatus ?? KIND_HINT[error.kind];
  return `The ${who} answered ${status}${code} (${hint})${error.message ? `: ${error.message}` : ''}.`;
}

/** What a transient failure says, for the retry log and the outage wait. */
export function describeTransient(error: ProviderError, who: string): string {
  const code = error.providerCode ? ` [${error.providerCode}]` : '';
  return `the ${who} answered ${error.status ?? 'nothing'}${code}${error.message ? `: ${error.message}` : ''}`;
}

/** True when the failure is a refusal that fails the task (a kind with a request code). */
export function isRefusal(error: ProviderError): error is ProviderError & { kind: keyof typeof REQUEST_CODE_OF } {
  return Object.hasOwn(REQUEST_CODE_OF, error.kind);
}

/**
 * The error object's code and message, whatever the shape: `{ error: { message, code, type } }` (OpenAI, Groq,
 * DeepSeek), `{ error: { type, message } }` (Anthropic), `{ object: "error", message, code }` (vLLM, Mistral),
 * `{ error: "text" }`, `{ message }`, or plain text.
 */
function errorFields(body: unknown): { code: string | null; type: string | null; message: string } {
  let value: unknown = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body);
    } catch {
      return { code: null, type: null, message: body };
    }
  }
  if (typeof value !== 'object' || value === null) return { code: null, type: null, message: '' };
  const outer = value as Record<string, unknown>;
  const inner =
    typeof outer.error === 'object' && outer.error !== null ? (outer.error as Record<string, unknown>) : outer;
  const text = (v: unknown) => (typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v));
  const message = typeof outer.error === 'string' ? outer.error : text(inner.message ?? inner.detail);
  const asCode = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v : null);
  // A number in `code` is the HTTP status again (vLLM), not a code.
  return { code: asCode(inner.code), type: asCode(inner.type), message };
}

/**
 * What an adapter does with a classified failure: an unusable reply (the model's own output was refused: re-asked,
 * nothing charged), a TransientModelError to retry, or the adapter's refusal error to fail the task.
 */
export function settleProviderError(
  error: ProviderError,
  options: {
    who: string;
    hints?: Readonly<Record<number, string>>;
    /** The adapter's own error class (ModelRequestError, AiSdkRequestError). */
    refusal: new (
      status: number | null,
      message: string,
      code: ProviderRequestCode,
      providerCode: string | null,
    ) => Error;
    /** What an unreachable provider said, without a URL (the connection error's name or message). */
    unreachable?: string;
  },
): { reply: ModelReply } | { error: Error } {
  if (error.kind === 'model_output') {
    const code = error.providerCode ? ` (${error.providerCode})` : '';
    return {
      reply: {
        type: 'invalid',
        detail: `the provider refused the model's output${code}${error.message ? `: ${error.message}` : ''}; call the offered tools with a JSON object of arguments`,
        usage: { inputTokens: 0, outputTokens: 0 },
      },
    };
  }
  if (error.transient) {
    const message =
      error.status === null
        ? `the ${options.who} could not be reached${options.unreachable ? ` (${options.unreachable})` : ''}`
        : describeTransient(error, options.who);
    return { error: new TransientModelError(message, error.retryAfterMs) };
  }
  if (isRefusal(error)) {
    return {
      error: new options.refusal(
        error.status,
        describeRefusal(error, options.who, options.hints),
        REQUEST_CODE_OF[error.kind],
        error.providerCode,
      ),
    };
  }
  // Not reached: every kind is transient, a refusal or the model's output.
  return {
    error: new options.refusal(error.status, describeTransient(error, options.who), 'model_request_failed', null),
  };
}
