/**
 * Values a call opened, found again where a result or a summary quotes them (an API that echoes the key it was
 * given), to be sealed as their tokens.
 */
import { type OpenedToken, leaves } from './tokens.js';

/** Values shorter than this are not searched for in text (they would match everywhere). */
const SHORTEST_ECHO = 3;

export interface Echo {
  value: string;
  token: string;
  pattern: RegExp | null;
}

/** What to look for in text: each opened value's leaves, longest first. */
export function echoList(opened: readonly OpenedToken[]): Echo[] {
  const list: Echo[] = [];
  for (const { token, value } of opened) {
    for (const leaf of leaves(value)) {
      if (leaf.length < SHORTEST_ECHO) continue;
      const escaped = leaf.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\s+/g, '\\s+');
      const loose = /\s/.test(leaf) || leaf.length < 6;
      list.push({
        value: leaf,
        token,
        pattern: loose
          ? new RegExp(leaf.length < 6 ? `(?<![A-Za-z0-9])${escaped}(?![A-Za-z0-9])` : escaped, 'g')
          : null,
      });
    }
  }
  return list.sort((a, b) => b.value.length - a.value.length);
}

export function replaceEchoes(text: string, echoes: readonly Echo[]): string {
  let out = text;
  for (const echo of echoes)
    out = echo.pattern ? out.replace(echo.pattern, echo.token) : out.split(echo.value).join(echo.token);
  return out;
}
