/** Small text helpers shared by the trace views. */
import { canonicalJson } from '../machines/lib/canonicalJson.js';

/** Canonical JSON of a value for display, or its string form when it is not JSON. */
export function jsonPreview(value: unknown): string {
  try {
    return canonicalJson(value);
  } catch {
    return String(value);
  }
}

/** `text` cut to at most `max` characters, with an ellipsis when cut. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
