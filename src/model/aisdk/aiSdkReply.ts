/**
 * Response side of the AI SDK adapter: the provider's response mapped to a ModelReply. The mapping reads the
 * language model's own result (captured by a middleware around the model, see aiSdkModel.ts), not the result of
 * `generateText`, because `generateText` parses each call's input text and pairs content with calls by id: a
 * duplicate key or a duplicate call id would be repaired before the host saw it. Here nothing is parsed, repaired
 * or dropped: ids, names and argument texts reach the machine's protocol gate exactly as the provider returned them.
 */
import type { LanguageModelMiddleware } from 'ai';
import type { ModelReply, ModelReplyWithVersion, ModelUsageReport } from '../agentModel.js';
import { type ModelPrices, priceOf, receivedText, textualToolCall, writtenCallDetail } from '../replyRules.js';

export { type ModelPrices, priceOf };

/** What the provider's language model returned for one call (the AI SDK's `LanguageModelV3GenerateResult`). */
export type ProviderResult = Awaited<ReturnType<NonNullable<LanguageModelMiddleware['wrapGenerate']>>>;

export interface ReplyOptions {
  prices?: ModelPrices;
  /** Charged when the provider reports no usage: the turn's reservation, so budgets fail closed. */
  fallbackUsage: { inputTokens: number; outputTokens: number };
}

/** Maps one provider result. */
export function toModelReply(result: ProviderResult, options: ReplyOptions): ModelReplyWithVersion {
  const reply = mapResult(result, usageOf(result, options));
  // The model that answered, as the provider names it: the audit records it.
  const version = result.response?.modelId;
  return typeof version === 'string' && version !== '' ? { ...reply, modelVersion: version } : reply;
}

/** The refusal reason of an output a provider's content filter withheld. */
export const CONTENT_FILTERED = 'the provider withheld the output (content filter)';

function mapResult(result: ProviderResult, usage: ModelUsageReport): ModelReply {
  const invalid = (detail: string): ModelReply => ({
    type: 'invalid',
    detail,
    received: receivedText(result.content),
    usage,
  });
  const finish = result.finishReason?.unified;
  if (finish === 'length')
    return invalid('the output was cut off at the token limit (finish reason "length"); reply more briefly');
  // How a refusal arrives through the AI SDK (Anthropic's "refusal" stop reason, OpenAI's and Azure's filters): asking
  // again gets the same answer, so the task ends model_refused instead of re-asking into protocol_error.
  if (finish === 'content-filter') return { type: 'refusal', reason: CONTENT_FILTERED, usage };
  if (finish === 'error') return invalid('the provider reported an error while generating the output');
  const content = Array.isArray(result.content) ? result.content : [];
  const executed = content.find(
    (part) => part.type === 'tool-result' || (part.type === 'tool-call' && part.providerExecuted === true),
  );
  if (executed)
    return invalid(
      'the provider ran a tool on its own; only the host runs tools, so call the offered tools as tool calls',
    );
  const calls = content.flatMap((part) => (part.type === 'tool-call' ? [part] : []));
  const text = content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
  if (calls.length > 0) {
    return {
      type: 'tool_calls',
      // Passed as they came: the protocol and schema gates decide. A non-string fails event validation.
      calls: calls.map((call) => ({
        ...(typeof call.toolCallId === 'string' && call.toolCallId !== '' ? { callId: call.toolCallId } : {}),
        name: call.toolName,
        arguments: call.input,
      })),
      text: text !== '' ? text : null,
      usage,
    };
  }
  if (text.trim() !== '') {
    const written = textualToolCall(text);
    if (written) return invalid(writtenCallDetail(written));
    return { type: 'answer', text, usage };
  }
  return invalid('empty output: no text and no tool calls');
}

/** A failure after which the provider's output exists but cannot be used (a body that is not the JSON it claims). */
export function unusableOutput(detail: string, options: ReplyOptions, result?: ProviderResult): ModelReply {
  return { type: 'invalid', detail, usage: result ? usageOf(result, options) : usageOf(undefined, options) };
}

function usageOf(result: ProviderResult | undefined, options: ReplyOptions): ModelUsageReport {
  const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : null);
  const input = count(result?.usage?.inputTokens?.total);
  const output = count(result?.usage?.outputTokens?.total);
  const tokens =
    input === null || output === null ? options.fallbackUsage : { inputTokens: input, outputTokens: output };
  return options.prices ? { ...tokens, costMicros: priceOf(tokens, options.prices) } : tokens;
}
