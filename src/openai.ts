/**
 * `statechart-agent/openai`: any model served through the OpenAI Chat Completions API with tool calling
 * (`createOpenAIModel`), and OpenAI's Responses API (`createOpenAIResponsesModel`).
 */
export { createOpenAIModel, ModelConfigError, type OpenAIModelOptions } from './model/openai/openaiModel.js';
export { createOpenAIResponsesModel, type OpenAIResponsesModelOptions } from './model/openai/responsesModel.js';
export { ModelRequestError, type ModelPrices } from './model/openai/openaiReply.js';
export { DEFAULT_SYSTEM_PROMPT } from './model/openai/openaiMessages.js';
export type { AgentErrorCode, ModelErrorCode } from './errorCodes.js';
