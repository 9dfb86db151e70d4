/**
 * A deterministic model for demos and tests. Each turn plays the next step of a script; a step can be a fixed
 * reply or a function of what the host observed (so the script reacts to conflicts, timeouts, rejections).
 * It records every request it was given and throws when its script runs out.
 *
 * Restart-safe: the step is chosen by the request's turn number, not by an in-memory cursor, so a task resumed in
 * another process continues the same script.
 */
import type { Json, Observation } from '../../machines/context.js';
import { AgentError } from '../errors.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import { DECISION_TOOL } from '../../machines/workflows.js';
import type { AgentModel, ModelReply, ModelRequest } from '../model/agentModel.js';

/** The scripted model was asked for more turns than its script has. */
export class ScriptExhaustedError extends AgentError<'script_exhausted'> {
  constructor(turn: number, length: number) {
    super('script_exhausted', `The scripted model was asked for turn ${turn}, but its script has ${length} step(s).`);
  }
}

/** What a script step sees. */
export interface ScriptView {
  turn: number;
  goal: string;
  observations: Observation[];
  /** The latest observation of `tool` in the previous batch. */
  last(tool: string): Observation | undefined;
  /** The data of the latest successful observation of `tool`, or undefined. */
  data<T = Json>(tool: string): T | undefined;
  /** The error code of the latest failed observation of `tool`, or undefined. */
  errorCode(tool: string): string | undefined;
}

export type ScriptStep = ModelReply | ((view: ScriptView) => ModelReply);

export interface RecordedRequest {
  turn: number;
  taskId: string;
  tools: string[];
  observations: Observation[];
  reply: ModelReply | null;
}

/** Reply builders for scripts. Call ids default to `call_<turn>_<n>`, filled in per turn. */
export const reply = {
  call(name: string, args: Record<string, unknown>, callId?: string): ModelReply {
    return { type: 'tool_calls', calls: [{ name, arguments: JSON.stringify(args), ...(callId ? { callId } : {}) }] };
  },
  calls(...calls: { name: string; args: Record<string, unknown> | string; callId?: string }[]): ModelReply {
    return {
      type: 'tool_calls',
      calls: calls.map((c) => ({
        name: c.name,
        arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args),
        ...(c.callId !== undefined ? { callId: c.callId } : {}),
      })),
    };
  },
  answer(text: string): ModelReply {
    return { type: 'answer', text };
  },
  /** A workflow's decision: a call of the host's `submit_decision` with `value` (`{ choice }` or the step's object). */
  decide(value: Record<string, unknown>, callId?: string): ModelReply {
    return reply.call(DECISION_TOOL, value, callId);
  },
  /** A plan: a call of the host's `propose_plan` (steps with their tool, purpose and dependencies). */
  plan(steps: { id: string; tool: string; purpose?: string; depends_on?: string[] }[], callId?: string): ModelReply {
    const args = { steps: steps.map((s) => ({ purpose: `run ${s.tool}`, depends_on: [], ...s })) };
    return reply.call(PLAN_TOOL, args, callId);
  },
  ask(question: string): ModelReply {
    return { type: 'ask_user', question };
  },
  refuse(reason: string): ModelReply {
    return { type: 'refusal', reason };
  },
  invalid(detail: string): ModelReply {
    return { type: 'invalid', detail };
  },
};

export interface ScriptedModelOptions {
  name?: string;
  /** Tokens reserved per turn (default 1,000). */
  reservationTokens?: number;
}

export class ScriptedModel implements AgentModel {
  readonly name: string;
  readonly reservation: { tokens: number; costMicros: number };
  readonly requests: RecordedRequest[] = [];

  constructor(
    private readonly script: ScriptStep[],
    options: ScriptedModelOptions = {},
  ) {
    this.name = options.name ?? 'scripted';
    this.reservation = { tokens: options.reservationTokens ?? 1000, costMicros: 0 };
  }

  async decide(request: ModelRequest): Promise<ModelReply> {
    const record: RecordedRequest = {
      turn: request.turn,
      taskId: request.taskId,
      tools: request.tools.map((t) => t.name),
      observations: request.observations,
      reply: null,
    };
    this.requests.push(record);
    const step = this.script[request.turn - 1];
    if (step === undefined) throw new ScriptExhaustedError(request.turn, this.script.length);
    const view = scriptView(request);
    const produced = typeof step === 'function' ? step(view) : step;
    const withIds = fillCallIds(produced, request.turn);
    const usage = withIds.usage ?? estimateUsage(request, withIds);
    record.reply = { ...withIds, usage };
    return record.reply;
  }

  /** Turns played so far. */
  get turns(): number {
    return this.requests.length;
  }
}

/** Creates a scripted model. */
export function scriptedModel(script: ScriptStep[], options?: ScriptedModelOptions): ScriptedModel {
  return new ScriptedModel(script, options);
}

function scriptView(request: ModelRequest): ScriptView {
  const last = (tool: string) => request.observations.findLast((o) => o.tool === tool);
  return {
    turn: request.turn,
    goal: request.goal,
    observations: request.observations,
    last,
    data<T>(tool: string) {
      const observation = last(tool);
      return observation?.ok ? (observation.data as T) : undefined;
    },
    errorCode(tool: string) {
      const observation = last(tool);
      return observation && !observation.ok ? observation.code : undefined;
    },
  };
}

function fillCallIds(produced: ModelReply, turn: number): ModelReply {
  if (produced.type !== 'tool_calls') return produced;
  return {
    ...produced,
    calls: produced.calls.map((call, i) => ('callId' in call ? call : { ...call, callId: `call_${turn}_${i + 1}` })),
  };
}

/** A deterministic stand-in for token counts: about four characters per token. */
function estimateUsage(request: ModelRequest, produced: ModelReply) {
  const input = request.goal.length + JSON.stringify(request.observations).length;
  const output = JSON.stringify(produced).length;
  return { inputTokens: Math.ceil(input / 4), outputTokens: Math.ceil(output / 4), costMicros: 0 };
}
