/**
 * The token that stands in for a sealed value, `[[sealed:<label>:<blob>]]`, and the path and text helpers the
 * sealing walks use. The label is for people and the model (`card-1111`); it is not authenticated: only the blob
 * is, and only a blob that opens for the task counts as a token.
 */
import type { Json } from '../../machines/context.js';

export const TOKEN = /\[\[sealed:([a-z0-9_-]{1,40}):([A-Za-z0-9_-]{8,})\]\]/g;
export const WHOLE_TOKEN = /^\[\[sealed:([a-z0-9_-]{1,40}):([A-Za-z0-9_-]{8,})\]\]$/;
/** An unfinished token at the end of a cut text. */
const CUT_TOKEN = /\[\[(?:s(?:e(?:a(?:l(?:e(?:d(?::[a-z0-9_-]*(?::[A-Za-z0-9_-]*\]?)?)?)?)?)?)?)?)?$/;

/**
 * The task a sealed value belongs to. The tenant and the start time are part of it, so a task created later under
 * a reused id (after its tombstone expired, or in another tenant) opens nothing of an earlier one.
 */
export interface SealScope {
  taskId: string;
  tenantId: string;
  startedAt: number;
}

/** A token a call opened, and the value it stood for. */
export interface OpenedToken {
  token: string;
  value: Json;
}

/** The owner string a sealer binds a blob to. */
export function ownerOf(scope: SealScope): string {
  return `${scope.taskId}\n${scope.tenantId}\n${scope.startedAt}`;
}

/** The task id of an owner string (for a sealer that forgets a task). */
export function taskOfOwner(owner: string): string {
  return owner.slice(0, owner.indexOf('\n'));
}

export function tokenText(label: string, blob: string): string {
  return `[[sealed:${label}:${blob}]]`;
}

/** Text for people: each token shown as its label, e.g. `‹card-1111›`. */
export function displayText(text: string): string {
  return text.replace(TOKEN, (_token, label: string) => `‹${label}›`);
}

/** `text` cut to `max` characters without leaving half a token at the end (a cut token would read as text). */
export function cutSealed(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const open = cut.lastIndexOf('[[sealed:');
  if (open >= 0 && cut.indexOf(']]', open) < 0) return cut.slice(0, open);
  return cut.replace(CUT_TOKEN, '');
}

export function labelOf(text: string): string {
  const label = text
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return label || 'value';
}

/** The label of a value sealed at a declared path: its last named segment, never a key taken from the data. */
export function pathLabel(path: readonly string[]): string {
  return labelOf([...path].reverse().find((segment) => segment !== '*') ?? 'value');
}

export function splitPath(path: string): string[] {
  return path.split('.');
}

export function matches(path: readonly string[], at: readonly string[]): boolean {
  return path.length === at.length && path.every((segment, i) => segment === '*' || segment === at[i]);
}

/** True when some path goes below `at`. */
export function leadsBelow(paths: readonly (readonly string[])[], at: readonly string[]): boolean {
  return paths.some(
    (path) => path.length > at.length && at.every((segment, i) => path[i] === '*' || path[i] === segment),
  );
}

/** The string and number leaves of a value (for finding a value quoted in text). */
export function leaves(value: Json): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value === 'number' || typeof value === 'boolean') return [String(value)];
  if (Array.isArray(value)) return value.flatMap(leaves);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(leaves);
  return [];
}
