/**
 * The chart the Stately inspector draws is the definition it receives in the root actor's `@xstate.actor` frame.
 * Every transition that has a guard in the machine's config must keep one there, by name: a composed guard
 * (`not(...)`, `and([...])`, `or([...])`) is a function, and a definition that drops it draws a refusal branch such
 * as `vetting.judging`'s scope refusal as unconditional.
 */
import { and, not, or } from 'xstate';
import { describe, expect, it } from 'vitest';
import { scenarios } from '../examples/booking/scenarios.js';
import { createAgentMachine } from '../machines/agentMachine.js';
import { emptyToolkit } from '../machines/toolkit.js';
import { guardExpression } from '../src/inspect/inspectorDefinition.js';
import { statelyFrames } from '../src/inspect/statelyFrames.js';
import { MemoryStore } from '../src/store/memoryStore.js';

interface GuardSite {
  path: string;
  sent: unknown;
}

/** Every `guard` in `config`, paired with what the sent definition holds at the same place. */
function guardSites(config: unknown, sent: unknown, path = ''): GuardSite[] {
  if (config === null || typeof config !== 'object') return [];
  const sites: GuardSite[] = [];
  for (const [key, value] of Object.entries(config)) {
    const there = sent !== null && typeof sent === 'object' ? (sent as Record<string, unknown>)[key] : undefined;
    if (key === 'guard' && value !== undefined) sites.push({ path: `${path}.guard`, sent: there });
    else if (typeof value === 'object') sites.push(...guardSites(value, there, `${path}.${key}`));
  }
  return sites;
}

const named = (guard: unknown) =>
  (typeof guard === 'string' && guard.length > 0) ||
  (typeof guard === 'object' && guard !== null && typeof (guard as { type?: unknown }).type === 'string');

describe('the definition the Stately inspector receives', () => {
  it('names the guard of every guarded transition of the chart', async () => {
    const frames: Record<string, unknown>[] = [];
    const result = await scenarios.normal({ store: new MemoryStore(), inspect: statelyFrames((f) => frames.push(f)) });
    expect(result.status.state).toBe('done');
    const root = frames.find((f) => f.type === '@xstate.actor' && typeof f.definition === 'string')!;
    const definition = JSON.parse(root.definition as string) as unknown;

    const config = createAgentMachine(emptyToolkit()).config;
    const sites = guardSites(config, definition);
    const unnamed = sites.filter((site) => !named(site.sent)).map((site) => site.path);
    console.log(`guarded transitions: ${sites.length}; named in the sent definition: ${sites.length - unnamed.length}`);
    expect(sites.length).toBeGreaterThanOrEqual(67);
    expect(unnamed).toEqual([]);

    // The scope refusal in vetting's ordered gates reads as the chart spells it.
    const vetting = (definition as { states: Record<string, { states: Record<string, { always?: unknown }> }> }).states
      .vetting!.states.judging!;
    expect(JSON.stringify(vetting)).toContain('"guard":"not(hasScopesForTool)"');
  });

  it("draws a sub-task's root actor as a child of its parent task", async () => {
    const frames: Record<string, unknown>[] = [];
    const result = await scenarios.delegated({
      store: new MemoryStore(),
      inspect: statelyFrames((f) => frames.push(f)),
    });
    expect(result.status.state).toBe('done');
    const childId = result.status.children[0]!.childTaskId;
    const actors = frames.filter((f) => f.type === '@xstate.actor');
    const child = actors.find((f) => f.sessionId === `task:${childId}`);
    expect(child?.parentId).toBe(`task:${result.status.taskId}`);
    expect(actors.find((f) => f.sessionId === `task:${result.status.taskId}`)?.parentId).toBeUndefined();
  });

  it('spells composed guards as the chart source does', () => {
    expect(guardExpression(not('a'))).toBe('not(a)');
    expect(guardExpression(and(['a', not('b'), or([not('c'), 'd'])]))).toBe('and(a, not(b), or(not(c), d))');
    expect(guardExpression({ type: 'withParams', params: { n: 1 } } as never)).toBe('withParams');
  });
});
