import { createHash } from 'node:crypto';
import { canonicalJson } from './canonicalJson.js';

/** Hex SHA-256 of a string. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** `sha256:<hex>` of the canonical JSON of a value: the hash that confirmations and audit records carry. */
export function hashArguments(value: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(value))}`;
}

/**
 * The idempotency key of a write: derived from the task and the business intent (tool + canonical arguments),
 * never from the model's call id, so it is the same across model re-proposals, retries and restarts.
 */
export function deriveIdempotencyKey(taskId: string, tool: string, argsHash: string): string {
  return `idem_${sha256Hex(`${taskId}\n${tool}\n${argsHash}`).slice(0, 40)}`;
}
