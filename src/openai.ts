/** `statechart-agent/openai`: any model served through the OpenAI Chat Completions API with tool calling. */
export { createOpenAIModel, ModelConfigError, type OpenAIModelOptions } from './model/openai/openaiModel.js';
export { ModelRequestError, type ModelPrices } from './model/openai/openaiReply.js';
export { DEFAULT_SYSTEM_PROMPT } from './model/openai/openaiMessages.js';
export type { AgentErrorCode, ModelErrorCode } from './errorCodes.js';
