/**
 * Sealers turn a sensitive value into an opaque blob and back. A task persists, streams and shows the model only the
 * blob (inside a token, see `tokens.ts`); the runtime opens it right before a tool that needs the value runs.
 *
 * Each blob is bound to the task that sealed it (its id, tenant and start time). Opening reports the owner, and the
 * runtime refuses a blob of another task: a token that leaked into a task from elsewhere, or a task created later
 * under a reused id, opens nothing there.
 *
 * Sealing is deterministic within a task (the same value gives the same blob): a call's arguments hash, its
 * idempotency key and its confirmation stay the same when the model proposes the same sealed value again.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { AgentError } from '../errors.js';
import { taskOfOwner } from './tokens.js';

export interface OpenedValue {
  /** Who sealed it: the task, as `Privacy` names it (task id, tenant, start time). */
  owner: string;
  plaintext: string;
}

export interface Sealer {
  /** `memory`: values live in this process only (lost on restart); `keyed`: any process with the key opens them. */
  readonly kind: 'memory' | 'keyed';
  /** An opaque blob of base64url characters for `plaintext`, bound to `owner` (the task that seals it). */
  seal(owner: string, plaintext: string): string;
  /** The value and its task, or undefined for a blob this sealer did not make (forged, cut, or from a lost process). */
  open(blob: string): OpenedValue | undefined;
  /** Drops what it keeps of a task's values (called when the task is erased); a sealer that keeps nothing omits it. */
  forget?(taskId: string): void;
}

/**
 * Values kept in this process's memory, under random ids. Nothing sensitive is ever written anywhere, and nothing
 * survives a restart: a task that resumes elsewhere cannot use a sealed value any more (the call fails with
 * `sealed_value_unavailable`, and nothing runs). For durable tasks with sensitive values, use `keyedSealer`.
 * Values are dropped `ttlMs` after they were last sealed or opened (default 24 h), and when their task is erased, so
 * the map does not grow without bound.
 */
export function memorySealer(options: { ttlMs?: number; now?: () => number } = {}): Sealer {
  const ttlMs = options.ttlMs ?? 86_400_000;
  const now = options.now ?? Date.now;
  const byBlob = new Map<string, OpenedValue & { at: number }>();
  const byValue = new Map<string, string>();
  let sweptAt = now();
  const sweep = () => {
    const time = now();
    if (time - sweptAt < Math.min(ttlMs, 60_000)) return;
    sweptAt = time;
    for (const [blob, entry] of byBlob) {
      if (time - entry.at > ttlMs) {
        byBlob.delete(blob);
        byValue.delete(valueKey(entry.owner, entry.plaintext));
      }
    }
  };
  return {
    kind: 'memory',
    seal(owner, plaintext) {
      sweep();
      const key = valueKey(owner, plaintext);
      const known = byValue.get(key);
      if (known) {
        byBlob.get(known)!.at = now();
        return known;
      }
      const blob = randomBytes(12).toString('base64url');
      byBlob.set(blob, { owner, plaintext, at: now() });
      byValue.set(key, blob);
      return blob;
    },
    open(blob) {
      const entry = byBlob.get(blob);
      if (!entry) return undefined;
      entry.at = now();
      return { owner: entry.owner, plaintext: entry.plaintext };
    },
    forget(taskId) {
      for (const [blob, entry] of byBlob) {
        if (taskOfOwner(entry.owner) !== taskId) continue;
        byBlob.delete(blob);
        byValue.delete(valueKey(entry.owner, entry.plaintext));
      }
    },
  };
}

function valueKey(owner: string, plaintext: string): string {
  return `${owner.length}:${owner}${plaintext}`;
}

/**
 * Values encrypted under a host key (32 bytes, e.g. from a KMS or a secret manager): the blob is the ciphertext, so
 * any process holding the key opens it after a restart, and the stores hold only ciphertext.
 *
 * Deterministic authenticated encryption in the SIV manner: the IV is an HMAC-SHA-256 of the owner and the value
 * (under a MAC key derived from the host key), the cipher is AES-256-CTR under a second derived key, and opening
 * recomputes the HMAC and compares. Equal values of one task give equal blobs (that is all it reveals); a changed or
 * forged blob fails to open. Rotating the key makes older blobs unopenable: finish or erase tasks first.
 */
export function keyedSealer(options: { key: Uint8Array | string }): Sealer {
  const key = typeof options.key === 'string' ? decodeKey(options.key) : Buffer.from(options.key);
  if (key.length !== 32)
    throw new AgentError(
      'invalid_sealer_key',
      `keyedSealer needs a 32-byte key (got ${key.length} bytes); e.g. randomBytes(32), given as bytes, hex or base64`,
    );
  const macKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'statechart-agent seal mac', 32));
  const encKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'statechart-agent seal enc', 32));
  const IV = 16;
  return {
    kind: 'keyed',
    seal(owner, plaintext) {
      const body = Buffer.concat([lengthPrefixed(owner), Buffer.from(plaintext, 'utf8')]);
      const iv = createHmac('sha256', macKey).update(body).digest().subarray(0, IV);
      const cipher = createCipheriv('aes-256-ctr', encKey, iv);
      return Buffer.concat([iv, cipher.update(body), cipher.final()]).toString('base64url');
    },
    open(blob) {
      const raw = Buffer.from(blob, 'base64url');
      if (raw.length <= IV + 2 || raw.toString('base64url') !== blob) return undefined;
      const iv = raw.subarray(0, IV);
      const decipher = createDecipheriv('aes-256-ctr', encKey, iv);
      const body = Buffer.concat([decipher.update(raw.subarray(IV)), decipher.final()]);
      const expected = createHmac('sha256', macKey).update(body).digest().subarray(0, IV);
      if (!timingSafeEqual(expected, iv)) return undefined;
      const length = body.readUInt16BE(0);
      if (2 + length > body.length) return undefined;
      return {
        owner: body.subarray(2, 2 + length).toString('utf8'),
        plaintext: body.subarray(2 + length).toString('utf8'),
      };
    },
  };
}

function lengthPrefixed(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const prefix = Buffer.alloc(2);
  prefix.writeUInt16BE(bytes.length);
  return Buffer.concat([prefix, bytes]);
}

function decodeKey(text: string): Buffer {
  if (/^[0-9a-f]{64}$/i.test(text)) return Buffer.from(text, 'hex');
  return Buffer.from(text, 'base64');
}
