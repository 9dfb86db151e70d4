import { describe, expect, it } from 'vitest';
import { passOrder, rotate } from '../scripts/bench/schedule.js';

const SYSTEMS = ['project', 'other', 'bare', 'project-memory', 'langgraph'] as const;
const CELLS = 4;
const PASSES = 5;

/** For each ordered pair (a right before b) in a cell: in how many passes it happened. */
function followers(order: (pass: number, cell: number) => readonly string[], cell: number) {
  const counts = new Map<string, number>();
  for (let pass = 1; pass <= PASSES; pass++) {
    const turn = order(pass, cell);
    for (let i = 1; i < turn.length; i++) {
      const pair = `${turn[i - 1]} > ${turn[i]}`;
      counts.set(pair, (counts.get(pair) ?? 0) + 1);
    }
  }
  return counts;
}

describe('the bench schedule', () => {
  it('runs every system of a cell once a pass', () => {
    for (let pass = 1; pass <= PASSES; pass++)
      for (let cell = 0; cell < CELLS; cell++)
        expect([...passOrder(SYSTEMS, pass, cell)].sort()).toEqual([...SYSTEMS].sort());
  });

  it('puts no system right after the same one in every pass, in any cell', () => {
    for (let cell = 0; cell < CELLS; cell++) {
      for (const [pair, passes] of followers((pass, c) => passOrder(SYSTEMS, pass, c), cell))
        expect(passes, `${pair} in cell ${cell}`).toBeLessThan(PASSES);
      // The compared checkout runs right before this project in some passes and right after it in others.
      const pairs = followers((pass, c) => passOrder(SYSTEMS, pass, c), cell);
      expect(pairs.get('project > other') ?? 0).toBeGreaterThan(0);
      expect(pairs.get('other > project') ?? 0).toBeGreaterThan(0);
    }
  });

  it('changes who goes first from pass to pass in every cell', () => {
    for (let cell = 0; cell < CELLS; cell++) {
      const firsts = new Set(Array.from({ length: PASSES }, (_, i) => passOrder(SYSTEMS, i + 1, cell)[0]));
      expect(firsts.size, `cell ${cell}`).toBeGreaterThan(2);
    }
  });

  it('is not the old schedule, which ran the K=200 x 50 cell in one order in every pass', () => {
    // Cells turned by the pass, systems by the pass plus the cell's place in that order: with as many systems as
    // cells the two turns cancel out. Four systems without LangGraph; the K=200 x 50 cell is the plan's last.
    const systems = SYSTEMS.slice(0, 4);
    const old = (pass: number, cell: number) => rotate(systems, pass + rotate([0, 1, 2, 3], pass).indexOf(cell));
    const orders = (of: (pass: number, cell: number) => readonly string[]) =>
      new Set(Array.from({ length: PASSES }, (_, i) => of(i + 1, 3).join(' ')));
    expect(orders(old).size).toBe(1);
    expect(orders((pass, cell) => passOrder(systems, pass, cell)).size).toBeGreaterThan(2);
  });
});
