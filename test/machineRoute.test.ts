import { describe, expect, it } from 'vitest';
import { type MachineRoute, activeRoute, currentRoute, withRoute } from '../src/runtime/machineRoute.js';

const route = (name: string): MachineRoute =>
  ({ toolkit: { rules: () => undefined, sha256: () => name }, actors: {} }) as unknown as MachineRoute;

describe('the shared machine route', () => {
  it('nests, and restores the outer route after a run that threw', () => {
    const a = route('a');
    const b = route('b');
    withRoute(a, () => {
      expect(() =>
        withRoute(b, () => {
          expect(activeRoute()).toBe(b);
          throw new Error('observer failed');
        }),
      ).toThrow('observer failed');
      expect(activeRoute()).toBe(a);
    });
    expect(currentRoute()).toBeUndefined();
  });

  it('an undefined route clears the outer one instead of inheriting it', () => {
    const a = route('a');
    withRoute(a, () => {
      withRoute(undefined, () => {
        expect(currentRoute()).toBeUndefined();
        expect(() => activeRoute()).toThrow(/outside the run of a task/);
      });
      expect(activeRoute()).toBe(a);
    });
  });
});
