/** The type of one state of the agent chart's config, as `agentSetup(...).createMachine` takes it (names checked). */
import type { agentSetup } from '../agentSetup.js';

type ChartConfig = Parameters<ReturnType<typeof agentSetup>['createMachine']>[0];
export type ChartState = NonNullable<ChartConfig['states']>[string];
