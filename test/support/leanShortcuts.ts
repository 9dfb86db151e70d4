/** The read round's two shortcuts, held off or counted, for the tests that compare them with the stepwise chart. */
import type { AgentMachine } from '../../machines/agentMachine.js';

export type Guards = Parameters<AgentMachine['provide']>[0]['guards'];
type GuardImpl = (args: unknown, params: unknown) => boolean;
const no = () => false;

/** The shortcuts' own guards held false: every round passes through `executing.selecting` and `deciding`. */
export const STEPWISE = { isNextStepRead: no, areReadsLastStep: no } as unknown as Guards;

/**
 * The chart (made by `chartWith`) with the shortcut to `thinking` counted: its last guard, `hasRoomForResults`, is
 * asked by it alone, so each time it holds the shortcut is taken. `stepwise` also holds the shortcuts' guards false.
 */
export function counted(base: AgentMachine, chartWith: (guards: Guards) => AgentMachine, stepwise = false) {
  let taken = 0;
  const asked = (base.implementations.guards as unknown as Record<string, GuardImpl>).hasRoomForResults!;
  const hasRoomForResults: GuardImpl = (args, params) => {
    const holds = asked(args, params);
    if (holds) taken += 1;
    return holds;
  };
  const off = stepwise ? STEPWISE : {};
  return { chart: chartWith({ ...off, hasRoomForResults } as Guards), taken: () => taken };
}
