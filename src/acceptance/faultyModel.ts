/**
 * The model side of the fault plan: one script per task, by its fault class. A well-behaved model reads, then writes
 * what the user asked for; a faulty one first proposes a call that must be refused (bad schema, a business rule
 * broken, out of scope, another tenant's resource, an unknown tool, duplicate call ids, arguments that are not JSON)
 * or obeys text injected into the read's output. Every proposal is recorded with the role it plays.
 */
import type { Json, Observation } from '../../machines/context.js';
import type { AgentModel, ModelReply, ModelRequest } from '../model/agentModel.js';
import type { Tool } from '../tool.js';
import type { TaskSpec } from './plan.js';
import type { AcceptanceCase, Proposal } from './types.js';

/** What a proposal is in the plan: a call that may run, or one that must be refused before it executes. */
export type ProposalRole = 'read' | 'write' | 'faulty' | 'obeyed';

export interface ProposedCall {
  callId: string;
  tool: string;
  /** Canonical arguments as sent, or the raw text for arguments that are not JSON. */
  args: string;
  role: ProposalRole;
  turn: number;
}

export class TaskScript {
  readonly proposals: ProposedCall[] = [];
  readonly observations = new Map<string, Observation>();
  /**
   * The arguments of the writes the user asked for, as the tool's input schema parses them (defaults filled in), in
   * canonical JSON: the only ones the kit's human confirms, and the only writes that may run.
   */
  readonly requestedWrites = new Set<string>();
  /** The same, as objects, by tool. */
  readonly requestedArgs: { tool: string; args: Record<string, Json> }[] = [];
  private readData: Json | undefined;
  private phase = 0;

  constructor(
    readonly spec: TaskSpec,
    readonly testCase: AcceptanceCase,
    private readonly tools: ReadonlyMap<string, Tool>,
    private readonly canonical: (value: Json) => string,
  ) {}

  next(request: ModelRequest): ModelReply {
    for (const observation of request.observations) {
      this.observations.set(observation.callId, observation);
      if (observation.ok && observation.tool === this.testCase.read.tool) this.readData = observation.data;
    }
    const turn = request.turn;
    const step = this.phase++;
    const { fault } = this.spec;
    if (step === 0) return this.calls(turn, [{ ...this.testCase.read, role: 'read' }]);
    const readFailed = this.readData === undefined;
    if (step === 1) {
      if (readFailed)
        return {
          type: 'answer',
          text: 'The search did not answer, so I cannot tell what is available. Nothing was done.',
        };
      switch (fault) {
        case 'invalid_schema':
          return this.calls(turn, [{ ...this.schemaBroken(this.write()), role: 'faulty' }]);
        case 'invalid_business':
          return this.calls(turn, [{ ...this.testCase.invalidBusiness, role: 'faulty' }]);
        case 'out_of_scope':
          return this.calls(turn, [{ ...this.testCase.outOfScope, role: 'faulty' }]);
        case 'other_tenant':
          return this.calls(turn, [{ ...this.testCase.otherTenant, role: 'faulty' }]);
        case 'unknown_tool':
          return this.calls(turn, [{ tool: 'drop_all_records', args: { confirm: true }, role: 'faulty' }]);
        case 'duplicate_call_ids': {
          const write = this.write();
          return this.calls(turn, [
            { ...write, role: 'faulty', callId: `c${turn}_dup` },
            { ...this.testCase.read, role: 'faulty', callId: `c${turn}_dup` },
          ]);
        }
        case 'malformed_arguments':
          return this.calls(turn, [
            { tool: this.write().tool, args: MALFORMED[this.spec.seed % MALFORMED.length]!, role: 'faulty' },
          ]);
        case 'injected_output':
          return this.calls(turn, [{ ...this.testCase.obey, role: 'obeyed' }]);
        default:
          return this.calls(turn, [{ ...this.write(), role: 'write' }]);
      }
    }
    const wrote = this.proposals.some((p) => p.role === 'write');
    if (step === 2 && !wrote && !(fault === 'injected_output' && this.spec.claimsSuccess)) {
      return this.calls(turn, [{ ...this.write(), role: 'write' }]);
    }
    if (fault === 'injected_output' && this.spec.claimsSuccess) {
      return { type: 'answer', text: 'Done as instructed: the action was approved and completed successfully.' };
    }
    return { type: 'answer', text: 'Done.' };
  }

  private write(): Proposal {
    return this.testCase.write(this.readData);
  }

  private calls(
    turn: number,
    calls: (Omit<Proposal, 'args'> & { args: Record<string, unknown> | string; role: ProposalRole; callId?: string })[],
  ): ModelReply {
    return {
      type: 'tool_calls',
      calls: calls.map((call, i) => {
        const callId = call.callId ?? `c${turn}_${i + 1}`;
        const args = typeof call.args === 'string' ? call.args : this.canonical(call.args as Json);
        this.proposals.push({ callId, tool: call.tool, args, role: call.role, turn });
        if (call.role === 'write' && typeof call.args !== 'string') {
          const parsed = this.tools.get(call.tool)?.input.safeParse(call.args);
          const value = (parsed?.success ? parsed.data : call.args) as Record<string, Json>;
          this.requestedWrites.add(this.canonical(value));
          this.requestedArgs.push({ tool: call.tool, args: value });
        }
        return {
          callId,
          name: call.tool,
          arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args),
        };
      }),
    };
  }

  /** The write's arguments broken so that its input schema refuses them (checked against the schema itself). */
  private schemaBroken(write: Proposal): Proposal {
    const schema = this.tools.get(write.tool)?.input;
    const keys = Object.keys(write.args);
    const candidates: Record<string, unknown>[] = [
      { ...write.args, unexpected_field: 'x' },
      ...keys.map((key) => Object.fromEntries(Object.entries(write.args).filter(([k]) => k !== key))),
      ...keys.map((key) => ({ ...write.args, [key]: typeof write.args[key] === 'string' ? 12345 : 'not-a-number' })),
    ];
    // Start at a place chosen by the task's seed, so that the run covers every kind of break.
    for (let i = 0; i < candidates.length; i++) {
      const args = candidates[(this.spec.seed + i) % candidates.length]!;
      if (!schema || !schema.safeParse(args).success) return { tool: write.tool, args };
    }
    throw new Error(`acceptance: no way found to break the input schema of ${write.tool}`);
  }
}

/** Arguments that are not a JSON object: truncated JSON, an array, a string, a number. */
const MALFORMED = ['{"unterminated": ', '[1, 2, 3]', '"just a string"', '42', 'not json at all', '{"a": 1} trailing'];

/** One model for the whole run: each request goes to its task's script. */
export class FaultyModel implements AgentModel {
  readonly name = 'acceptance-scripted';
  readonly reservation = { tokens: 1_000, costMicros: 0 };
  private readonly scripts = new Map<string, TaskScript>();

  add(taskId: string, script: TaskScript): void {
    this.scripts.set(taskId, script);
  }

  async decide(request: ModelRequest): Promise<ModelReply> {
    const script = this.scripts.get(request.taskId);
    if (!script) throw new Error(`acceptance: no script for task ${request.taskId}`);
    const reply = script.next(request);
    return { ...reply, usage: { inputTokens: 200, outputTokens: 50, costMicros: 0 } };
  }
}
