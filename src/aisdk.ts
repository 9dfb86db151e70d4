/** `statechart-agent/ai-sdk`: any language model of a Vercel AI SDK 6 provider (Anthropic, Google, OpenAI, Ollama…). */
export {
  AiSdkConfigError,
  createAiSdkModel,
  type AiSdkLanguageModel,
  type AiSdkModelOptions,
} from './model/aisdk/aiSdkModel.js';
export { AiSdkAbortedError, AiSdkRequestError } from './model/aisdk/aiSdkErrors.js';
export type { ModelPrices } from './model/aisdk/aiSdkReply.js';
export type { AgentErrorCode, ModelErrorCode } from './errorCodes.js';
