import { canonicalJson } from './canonicalJson.js';

/**
 * A short, non-cryptographic 53-bit fingerprint of a JSON value's canonical form (two multiplicative lanes with a
 * final avalanche, in the manner of cyrb53). Used only to tell a new observation from a repeated one (loop
 * detection); never where an attacker could profit from a collision.
 */
export function fingerprint(value: unknown): string {
  const text = canonicalJson(value);
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}
