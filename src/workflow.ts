/**
 * `defineWorkflow`: a host's fixed flow with model decisions inside it (the third planning mode of the design
 * sources). The program makes the calls, with arguments from what earlier steps established and the task's trusted
 * inputs (its mandate, its principal); the model only decides where a step asks it to, within choices or a schema.
 *
 *   const refund = defineWorkflow({
 *     name: 'refund',
 *     start: 'extract',
 *     steps: {
 *       extract: { decide: { prompt: 'Which order?', output: z.strictObject({ order_id: z.string() }) }, next: () => 'lookup' },
 *       lookup: { call: { tool: 'get_order', args: (facts) => ({ order_id: decided(facts.extract).order_id }) } },
 *     },
 *   });
 *   createOrchestrator({ tools, model, workflows: [refund] }).start({ ..., workflow: 'refund' });
 */
import type { Json } from '../machines/lib/strictJson.js';
import type { WorkflowDefinition, WorkflowFact } from '../machines/workflows.js';
import { workflowProblem } from '../machines/lib/workflow.js';
import { AgentError } from './errors.js';

export type {
  WorkflowCall,
  WorkflowDecision,
  WorkflowDefinition,
  WorkflowFact,
  WorkflowFacts,
  WorkflowStep,
  WorkflowTask,
} from '../machines/workflows.js';

/** Checks a workflow's shape (steps, start, each step a call or a decision) and returns it; the tools are checked
 * when the orchestrator is made. */
export function defineWorkflow<W extends WorkflowDefinition>(workflow: W): W {
  const problem = workflowProblem(workflow, () => true);
  if (problem) throw new AgentError('invalid_workflow', `workflow ${JSON.stringify(workflow?.name)}: ${problem}`);
  return workflow;
}

/** The value a step established (a call's result or a decision), typed by the caller; throws if it has none. */
export function established<T = Json>(fact: WorkflowFact | undefined): T {
  if (!fact?.ok) throw new Error(fact ? `the step failed (${fact.code})` : 'the step has not run');
  return fact.value as T;
}
