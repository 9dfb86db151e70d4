/**
 * The sizes every model adapter derives from its options the same way: the prompt's token bound, the cap of each tool
 * result, the bound past which older turns are compacted, and the turn's reservation (the most a turn may spend, as
 * the budgets reserve it before the call), with the usage charged when a response reports none.
 */
import { defaultMaxPromptTokens } from './compaction.js';
import { type AdapterOptions, priceOf } from './replyRules.js';

export const DEFAULT_PROMPT_TOKEN_BOUND = 16_000;
export const DEFAULT_MAX_TOOL_RESULT_BYTES = 8_192;

export interface AdapterLimits {
  promptTokenBound: number;
  maxToolResultBytes: number;
  maxPromptTokens: number;
  /** Charged for a reply that reports no usage: the whole prompt bound and the output limit. */
  fallbackUsage: { inputTokens: number; outputTokens: number };
  reservation: { tokens: number; costMicros: number };
}

/**
 * The limits of an adapter whose replies are at most `maxOutputTokens` long. `positive` is the adapter's own check
 * (it throws that adapter's configuration error for a value that is not a positive integer).
 */
export function adapterLimits(
  options: AdapterOptions & { maxPromptTokens?: number },
  maxOutputTokens: number,
  positive: (value: number | undefined, fallback: number, what: string) => number,
): AdapterLimits {
  const promptTokenBound = positive(options.promptTokenBound, DEFAULT_PROMPT_TOKEN_BOUND, 'promptTokenBound');
  const maxToolResultBytes = positive(options.maxToolResultBytes, DEFAULT_MAX_TOOL_RESULT_BYTES, 'maxToolResultBytes');
  const maxPromptTokens = positive(
    options.maxPromptTokens,
    defaultMaxPromptTokens(promptTokenBound),
    'maxPromptTokens',
  );
  const fallbackUsage = { inputTokens: promptTokenBound, outputTokens: maxOutputTokens };
  return {
    promptTokenBound,
    maxToolResultBytes,
    maxPromptTokens,
    fallbackUsage,
    reservation: {
      tokens: promptTokenBound + maxOutputTokens,
      costMicros: options.prices ? priceOf(fallbackUsage, options.prices) : 0,
    },
  };
}
