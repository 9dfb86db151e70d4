/**
 * The stored rows of a MemoryStore, for tests that must put data there as another build (or a corruption) left it,
 * bypassing `save` and its checks. Reaches into the store's private map: nothing in the shipped class exists for tests.
 */
import type { MemoryStore } from '../../src/store/memoryStore.js';

export interface RawRow {
  envelope: string;
  revision: number;
  summary: unknown;
  audit: string[];
  transcript: string[];
}

export function rawRows(store: MemoryStore): Map<string, RawRow> {
  return (store as unknown as { rows: Map<string, RawRow> }).rows;
}
