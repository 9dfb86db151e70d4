/** The hashes of `machines/lib/hashing.ts`, bound to node:crypto's SHA-256. */
import { createHash } from 'node:crypto';
import { argumentsHash, idempotencyKeyFor } from '../machines/lib/hashing.js';

/** Hex SHA-256 of a string. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** `sha256:<hex>` of the canonical JSON of a value: the hash that confirmations and audit records carry. */
export function hashArguments(value: unknown): string {
  return argumentsHash(sha256Hex, value);
}

/** The idempotency key of a write: task + tool + arguments hash, never the model's call id. */
export function deriveIdempotencyKey(taskId: string, tool: string, argsHash: string): string {
  return idempotencyKeyFor(sha256Hex, taskId, tool, argsHash);
}
