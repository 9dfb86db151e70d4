/**
 * The host's own tools as the model is offered them. `propose_plan`, as the model is offered it when the task may plan (`canProposePlan`): a call of
 * it is a plan, never run; the plan gate in the chart checks it. Its parameters are the JSON Schema of the arguments
 * the plan gate accepts (`planArgumentsSchema`), written out so providers that take strict schemas take it as is.
 */
import { PLAN_LIMITS, PLAN_TOOL } from '../../machines/plans.js';
import type { OfferedTool } from '../model/agentModel.js';
import { z } from 'zod';
import type { AgentContext } from '../../machines/context.js';
import { decisionSchema, currentStep } from '../../machines/lib/workflow.js';
import type { Toolkit } from '../../machines/toolkit.js';
import { DECISION_TOOL } from '../../machines/workflows.js';

export const PLAN_TOOL_DEFINITION: OfferedTool = {
  name: PLAN_TOOL,
  description:
    'Propose the whole plan before acting: the steps, each one call of an offered tool with its purpose, and the steps it needs first. ' +
    'The host checks the plan (tools, permissions, mandate, budget) and may have it approved; then only the steps whose dependencies succeeded are offered, one by one. ' +
    'Propose a plan alone, without other tool calls. After a step fails you may propose a new plan for what is left.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['steps'],
    properties: {
      steps: {
        type: 'array',
        minItems: 1,
        maxItems: PLAN_LIMITS.steps,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'tool', 'purpose', 'depends_on'],
          properties: {
            id: { type: 'string', description: 'A short id such as "s1" (letters, digits, _ and -).' },
            tool: { type: 'string', description: 'The name of the tool this step calls.' },
            purpose: { type: 'string', description: 'What the step establishes or does, in one line.' },
            depends_on: {
              type: 'array',
              items: { type: 'string' },
              description: 'Ids of the steps that must succeed first ([] for none).',
            },
          },
        },
      },
    },
  },
  effect: 'read',
};

/**
 * The decision a workflow asks of the model now, as the one tool it is offered (`submit_decision`): the step's prompt
 * as its description, and the step's choices or output schema as its parameters. None when no decision is asked.
 */
export function decisionTools(context: AgentContext, toolkit: Toolkit): OfferedTool[] {
  const at = currentStep(context, toolkit);
  const decide = at?.step.decide;
  if (!at || !decide) return [];
  let parameters: Record<string, unknown>;
  try {
    parameters = z.toJSONSchema(decisionSchema(decide), { unrepresentable: 'any' }) as Record<string, unknown>;
    delete parameters.$schema;
  } catch {
    parameters = { type: 'object' };
  }
  return [
    {
      name: DECISION_TOOL,
      description: `Workflow ${context.workflow!.name}, step ${at.id}: ${decide.prompt} Give only this decision; the program does the rest.`,
      parameters,
      effect: 'read',
    },
  ];
}
