/**
 * The task trace page (renderTraceHtml): which states and transitions are marked, what the timeline shows, and that
 * the page is self-contained. Its CLI (`npm run trace`) is in traceCli.process.test.ts; the screenshot test looks at
 * it in Chromium.
 */
import { describe, expect, it } from 'vitest';
import { scenarios } from '../examples/booking/scenarios.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { renderTraceHtml } from '../src/visualize/traceHtml.js';

const classesOf = (html: string, id: string) => html.match(new RegExp(`<g class="([^"]*)" id="state-${id}">`))?.[1];

describe('renderTraceHtml', () => {
  it('marks the visited states, the final state and the transitions taken (refused scenario)', async () => {
    const { status, audit } = await scenarios.refused({ store: new MemoryStore() });
    const html = renderTraceHtml({ status, audit });
    expect(classesOf(html, 'deciding')).toBe('state visited');
    expect(classesOf(html, 'vetting')).toBe('compound visited');
    for (const gate of ['judging', 'validating', 'authorizing'])
      expect(classesOf(html, `vetting_${gate}`), gate).toBe('state visited');
    expect(classesOf(html, 'executing')).toBe('compound visited');
    expect(classesOf(html, 'executing_selecting')).toBe('state visited');
    expect(classesOf(html, 'failed')).toBe('final visited current');
    for (const untouched of [
      'executing_reading',
      'executing_writing',
      'executing_reconciling',
      'awaitingUser',
      'done',
      'reasking',
    ]) {
      expect(classesOf(html, untouched), untouched).toMatch(/^(state|final)$/);
    }
    const taken = [...html.matchAll(/<g class="transition taken"><title>([^<]*)<\/title>/g)].map((m) =>
      m[1]!.split(':')[0]!.replace(/^\d+\. /, ''),
    );
    expect(taken).toEqual(
      expect.arrayContaining([
        'deciding → thinking',
        'thinking → vetting',
        // The executive room: refused in authorizing; six people in a room for four: refused in validating.
        'vetting.authorizing → vetting.judging',
        'vetting.validating → vetting.judging',
        'vetting.judging → executing',
        'executing.selecting → deciding',
      ]),
    );
    expect(taken.some((t) => t.includes('thinking → stopping'))).toBe(true);
    expect(taken.some((t) => t.includes('stopping → failed'))).toBe(true);
    expect(taken.some((t) => t.includes('reading') || t.includes('writing'))).toBe(false);
  });

  it('lists gate decisions, coloured, with their codes, and ends with the stop reason', async () => {
    const { status, audit } = await scenarios.refused({ store: new MemoryStore() });
    const html = renderTraceHtml({ status, audit });
    const rows = [
      ...html.matchAll(
        /<tr class="gate"><td>\d+<\/td>.*?<td>gate (\w+)<\/td><td><code>(\w+)<\/code><\/td><td class="decision (\w*)">(\w+)<\/td><td>(.*?)<\/td><\/tr>/g,
      ),
    ].map((m) => `${m[1]} ${m[2]} ${m[4]}/${m[3]} ${m[5]!.replace(/<[^>]+>/g, '').split(' ')[0]}`);
    expect(rows).toEqual([
      'schema reserve_room pass/pass arguments',
      'mandate reserve_room pass/pass within',
      'business reserve_room pass/pass business',
      'permission reserve_room reject/reject permission_denied',
      'schema reserve_room pass/pass arguments',
      'mandate reserve_room pass/pass within',
      'business reserve_room reject/reject capacity_exceeded',
    ]);
    expect(html).toMatch(
      /<tr class="task_stopped stop">.*<td class="decision reject">failed<\/td><td><code>goal_not_met<\/code>: the model answered/,
    );
  });

  it('shows tool calls, the conflict result and the final done state of the conflict scenario', async () => {
    const { status, audit } = await scenarios.conflict({ store: new MemoryStore() });
    const html = renderTraceHtml({ status, audit });
    expect(classesOf(html, 'done')).toBe('final visited current');
    expect(classesOf(html, 'executing_writing')).toBe('state visited');
    expect(html).toMatch(/>writing<\/text>\n<text class="visits"[^>]*>×2<\/text>/);
    expect(html).toMatch(
      /<td>tool result<\/td><td><code>reserve_room<\/code><\/td><td class="decision reject">conflict<\/td>/,
    );
    expect(html).toContain('<span class="pill pass">done</span> <code>goal_met</code>');
  });

  it('is self-contained and deterministic', async () => {
    const { status, audit } = await scenarios.lostResponse({ store: new MemoryStore() });
    const html = renderTraceHtml({ status, audit });
    expect(html).not.toMatch(/<script|<link|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(renderTraceHtml({ status, audit })).toBe(html);
    expect(classesOf(html, 'executing_reconciling')).toBe('state visited');
    expect(html).toMatch(/<td>lookup<\/td><td><code>reserve_room<\/code><\/td><td class="decision pass">found<\/td>/);
  });
});
