/**
 * Bounded, JSON-safe copies of arbitrary values (events, tool outputs, contexts) for inspection messages: never a
 * raw `JSON.stringify` of something that may hold actor refs, cycles or megabytes.
 */

export interface SafeJsonLimits {
  depth: number;
  maxKeys: number;
  maxItems: number;
  maxString: number;
}

export const DEFAULT_LIMITS: SafeJsonLimits = { depth: 5, maxKeys: 24, maxItems: 12, maxString: 300 };

/**
 * A JSON-safe copy of `value` within `limits`: actor refs become `{ "$actor": id }`, Errors `{ "$error": name,
 * message }`, functions and symbols are dropped, cycles and depth overflow become `"[circular]"` / `"[…]"`.
 */
export function toSafeJson(value: unknown, limits: SafeJsonLimits = DEFAULT_LIMITS): unknown {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (v === null || typeof v === 'boolean') return v;
    if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
    if (typeof v === 'string') return truncate(v, limits.maxString);
    if (typeof v === 'bigint') return v.toString();
    if (typeof v !== 'object') return undefined;
    if (seen.has(v)) return '[circular]';
    if (isActorRef(v)) return { $actor: String((v as { id?: unknown }).id ?? (v as { sessionId: string }).sessionId) };
    if (v instanceof Error) return { $error: v.name, message: truncate(v.message, limits.maxString) };
    if (depth >= limits.depth) return '[…]';
    seen.add(v);
    try {
      if (Array.isArray(v)) {
        const items = v.slice(0, limits.maxItems).map((item) => walk(item, depth + 1) ?? null);
        if (v.length > limits.maxItems) items.push(`[+${v.length - limits.maxItems} more]`);
        return items;
      }
      const out: Record<string, unknown> = {};
      const keys = Object.keys(v);
      for (const key of keys.slice(0, limits.maxKeys)) {
        const item = walk((v as Record<string, unknown>)[key], depth + 1);
        if (item !== undefined) out[key] = item;
      }
      if (keys.length > limits.maxKeys) out['…'] = `+${keys.length - limits.maxKeys} keys`;
      return out;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, 0);
}

function isActorRef(v: object): boolean {
  const r = v as { sessionId?: unknown; send?: unknown; getSnapshot?: unknown };
  return typeof r.sessionId === 'string' && typeof r.send === 'function' && typeof r.getSnapshot === 'function';
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
