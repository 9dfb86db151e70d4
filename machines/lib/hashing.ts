/**
 * The formats of the hashes a task persists. The SHA-256 itself is injected (the runtime passes node:crypto's), so
 * these stay pure; the formats never change, or stored confirmations and idempotency keys would stop matching.
 */
import { canonicalJson } from './canonicalJson.js';

type Sha256 = (text: string) => string;

/** `sha256:<hex>` of the canonical JSON of a value: the hash that confirmations and audit records carry. */
export function argumentsHash(sha256: Sha256, value: unknown): string {
  return canonicalHash(sha256, canonicalJson(value));
}

/** `argumentsHash` of the value whose canonical JSON is `text` (already written: the schema gate writes it). */
export function canonicalHash(sha256: Sha256, text: string): string {
  return `sha256:${sha256(text)}`;
}

/**
 * The idempotency key of a write: derived from the task and the business intent (tool + canonical arguments),
 * never from the model's call id, so it is the same across model re-proposals, retries and restarts.
 */
export function idempotencyKeyFor(sha256: Sha256, taskId: string, tool: string, argsHash: string): string {
  return `idem_${sha256(`${taskId}\n${tool}\n${argsHash}`).slice(0, 40)}`;
}
