/**
 * `statechart-agent/mcp`: the tools of an MCP server (official `@modelcontextprotocol/sdk` client, an optional peer;
 * stdio or Streamable HTTP) behind the same gates as the host's own tools. The host's policy per tool decides its
 * effect, scopes, confirmation, timeout and mandate rule; the server's annotations can only make a tool stricter;
 * unlisted tools are not imported; results are checked, capped and passed to the model as data.
 */
export { connectMcp, type McpConnectOptions, type McpConnection, type McpStdioOptions } from './mcp/connect.js';
export {
  IDEMPOTENCY_META_KEY,
  importMcpTools,
  type ImportMcpToolsOptions,
  type ImportedMcpTools,
  type McpSkipReason,
} from './mcp/importTools.js';
export type {
  HintConflictMode,
  McpLookupContext,
  McpReadPolicy,
  McpToolHints,
  McpToolPolicy,
  McpWritePolicy,
} from './mcp/policy.js';
export {
  DEFAULT_MAX_RESULT_BYTES,
  untrustedOutputSchema,
  type McpCallResult,
  type UntrustedOutput,
} from './mcp/result.js';
export { McpConnectionError, McpLookupUnavailableError, McpPolicyError } from './errors.js';
export type { AgentErrorCode, McpErrorCode } from './errorCodes.js';
