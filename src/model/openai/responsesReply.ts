/**
 * Response side of the Responses API adapter: a `Response` object mapped to a ModelReply. Like the Chat Completions
 * mapping it never parses, repairs or drops a call: `call_id`s, names and argument strings reach the machine's gates
 * as the model produced them. Transport errors use the Chat Completions adapter's sorting (settleOpenAIError), which
 * applies the shared taxonomy (providerErrors.ts): the same `openai` client raises the same errors on both APIs.
 *
 * Output items read: `function_call` (a proposal), `message` with `output_text` (text) or `refusal` parts, and
 * `reasoning` (skipped: the model's own notes, neither answer nor call). Any other item (a hosted tool's call) is not
 * something this adapter offered, so the reply is unusable and re-asked.
 */
import { maskedLine } from '../replyRules.js';
import { TransientModelError } from '../agentModel.js';
import type { Response, ResponseOutputItem } from 'openai/resources/responses/responses';
import type { ModelReply, ModelReplyWithVersion, ModelUsageReport } from '../agentModel.js';
import { type ModelPrices, priceOf, receivedText, textualToolCall, writtenCallDetail } from '../replyRules.js';

export interface ResponsesReplyOptions {
  prices?: ModelPrices;
  /** Charged when the server reports no usage: the turn's reservation, so budgets fail closed. */
  fallbackUsage: { inputTokens: number; outputTokens: number };
}

/** Maps one response. `response` is whatever the client returned (a server may send non-JSON text). */
export function toResponsesReply(response: unknown, options: ResponsesReplyOptions): ModelReplyWithVersion {
  if (typeof response === 'string' || typeof response !== 'object' || response === null) {
    return {
      type: 'invalid',
      detail: `the server answered ${typeof response === 'string' ? `${response.length} characters of text` : String(response)}, not a response object`,
      ...(typeof response === 'string' ? { received: response } : {}),
      usage: usageOf({}, options),
    };
  }
  const body = response as Partial<Response>;
  const reply = mapResponse(body, usageOf(body, options));
  // The model that answered, as the API names it ("o3-2025-04-16"): the audit records it.
  return typeof body.model === 'string' && body.model !== '' ? { ...reply, modelVersion: body.model } : reply;
}

function mapResponse(body: Partial<Response>, usage: ModelUsageReport): ModelReply {
  const invalid = (detail: string): ModelReply => ({
    type: 'invalid',
    detail,
    received: receivedText(body.output ?? body),
    usage,
  });
  if (body.status === 'incomplete') {
    const reason = body.incomplete_details?.reason;
    // Withheld by the provider's filter: asking again gets the same, so it is a refusal (model_refused).
    if (reason === 'content_filter') {
      return { type: 'refusal', reason: 'the provider withheld the output (content filter)', usage };
    }
    if (reason === 'max_output_tokens') {
      return invalid(
        'the output was cut off at the token limit (status "incomplete", max_output_tokens); reply more briefly',
      );
    }
    return invalid(`the response is incomplete (${JSON.stringify(reason ?? null)})`);
  }
  if (body.status === 'failed') {
    const error = body.error;
    const what = `the response failed${error ? ` (${error.code}: ${maskedLine(String(error.message ?? ''))})` : ''}`;
    // The provider's own trouble, not the model's output: retried with backoff like a 5xx or a 429, never charged
    // as unusable output.
    if (error?.code === 'server_error' || error?.code === 'rate_limit_exceeded') throw new TransientModelError(what);
    return invalid(what);
  }
  if (!Array.isArray(body.output)) return invalid('the response has no output');

  const calls: { callId?: string; name: string; arguments: string }[] = [];
  const texts: string[] = [];
  const refusals: string[] = [];
  for (const item of body.output as (ResponseOutputItem | null)[]) {
    const type = typeof item === 'object' && item !== null ? item.type : undefined;
    if (type === 'reasoning') continue;
    if (type === 'function_call') {
      const call = item as Partial<Extract<ResponseOutputItem, { type: 'function_call' }>>;
      const args: unknown = call.arguments;
      calls.push({
        // Passed as they came: the protocol and schema gates decide. A non-string fails event validation.
        ...(typeof call.call_id === 'string' ? { callId: call.call_id } : {}),
        name: call.name as string,
        arguments: (args !== null && typeof args === 'object' ? JSON.stringify(args) : args) as string,
      });
      continue;
    }
    if (type === 'message') {
      const content = (item as { content?: unknown }).content;
      for (const part of Array.isArray(content) ? content : []) {
        const { type: partType, text, refusal } = (part ?? {}) as { type?: unknown; text?: unknown; refusal?: unknown };
        if (partType === 'output_text' && typeof text === 'string') texts.push(text);
        else if (partType === 'refusal' && typeof refusal === 'string') refusals.push(refusal);
      }
      continue;
    }
    return invalid(
      `unsupported output item ${JSON.stringify(String(type))}; only function calls and messages are accepted`,
    );
  }
  const text = texts.join('');
  if (refusals.some((r) => r.trim() !== '')) return { type: 'refusal', reason: refusals.join(' ').trim(), usage };
  if (calls.length > 0) return { type: 'tool_calls', calls, text: text.trim() !== '' ? text : null, usage };
  if (text.trim() !== '') {
    const written = textualToolCall(text);
    if (written) return invalid(writtenCallDetail(written));
    return { type: 'answer', text, usage };
  }
  return invalid('empty output: no text, function calls or refusal');
}

function usageOf(body: Partial<Response>, options: ResponsesReplyOptions): ModelUsageReport {
  const reported = body.usage;
  const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : null);
  const input = count(reported?.input_tokens);
  const output = count(reported?.output_tokens);
  const tokens =
    input === null || output === null ? options.fallbackUsage : { inputTokens: input, outputTokens: output };
  return options.prices ? { ...tokens, costMicros: priceOf(tokens, options.prices) } : tokens;
}
