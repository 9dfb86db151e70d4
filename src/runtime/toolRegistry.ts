/**
 * The tools an orchestrator knows, with the derived views the machine and the model need: the catalog of facts
 * persisted with a task, the toolkit the chart's gates read, and the tools offered to the model.
 */
import type { Catalog, Principal } from '../../machines/context.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import { DECISION_TOOL, type WorkflowDefinition } from '../../machines/workflows.js';
import { workflowProblem } from '../../machines/lib/workflow.js';
import type { OfferRule, SyncCheck, ToolRules, Toolkit } from '../../machines/toolkit.js';
import { checkNow } from './hookNow.js';
import { AgentError, type CatalogDifference, ToolDefinitionError } from '../errors.js';
import { catalogDifferences } from './catalogBinding.js';
import { sha256Hex } from '../hashing.js';
import type { OfferedTool } from '../model/agentModel.js';
import { Privacy } from '../privacy/privacy.js';
import { sealedParse } from './sealedParse.js';
import { type Tool, defineTool, toolParametersSchema, toolVersion } from '../tool.js';
import { type SubtaskStarter, type SubtaskTool, bindSubtask, subtaskRulesOf } from '../subtask.js';

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly schemas = new Map<string, Record<string, unknown>>();
  private readonly rules = new Map<string, ToolRules>();
  /** Computed once: hashing a contract means rendering its schemas. */
  private readonly versions = new Map<string, string>();
  /** What the chart's gates read: the tools as installed now, and node:crypto's SHA-256. */
  readonly toolkit: Toolkit;

  /** Seals sensitive values where they enter a task and opens them for the tools that take them. */
  readonly privacy: Privacy;

  /** The host's workflows by name (`createOrchestrator({ workflows })`). */
  private readonly workflows = new Map<string, WorkflowDefinition>();

  /**
   * The host refreshes the principal's session before a write (`refreshPrincipal`): the re-check waits for it, so no
   * tool's re-check is asked by the gate itself (`recheckNow`). Set by the orchestrator that installs the tools.
   */
  refreshesSession = false;

  /** Starts children and finds them, for sub-task tools (`defineSubtask`); set by the orchestrator that installs them. */
  subtaskStarter: SubtaskStarter | null = null;

  constructor(
    tools: readonly Tool[],
    privacy: Privacy = new Privacy(),
    offer?: OfferRule,
    workflows: readonly WorkflowDefinition[] = [],
  ) {
    this.privacy = privacy;
    const starter = (): SubtaskStarter => {
      if (!this.subtaskStarter) throw new Error('no orchestrator starts the sub-tasks of these tools');
      return this.subtaskStarter;
    };
    for (const given of tools) {
      const tool: Tool = subtaskRulesOf(given) ? bindSubtask(given as SubtaskTool, starter) : given;
      if (tool.name === PLAN_TOOL || tool.name === DECISION_TOOL)
        throw new ToolDefinitionError(
          tool.name,
          `${tool.name} is the host's own tool (plans, decisions); choose another name`,
        );
      if (this.tools.has(tool.name))
        throw new AgentError('duplicate_tool', `two tools are named ${JSON.stringify(tool.name)}`);
      defineTool(tool as never);
      this.tools.set(tool.name, tool);
      this.schemas.set(tool.name, toolParametersSchema(tool));
      this.rules.set(
        tool.name,
        rulesOf(tool, privacy, () => this.refreshesSession),
      );
    }
    this.checkDependencies();
    this.checkCompensations();
    this.checkSubtasks();
    for (const workflow of workflows) {
      const problem = workflowProblem(workflow, (name) => this.tools.has(name));
      if (problem) throw new AgentError('invalid_workflow', `workflow ${JSON.stringify(workflow?.name)}: ${problem}`);
      if (this.workflows.has(workflow.name))
        throw new AgentError('invalid_workflow', `two workflows are named ${JSON.stringify(workflow.name)}`);
      this.workflows.set(workflow.name, workflow);
    }
    this.toolkit = {
      rules: (name) => this.rules.get(name),
      sha256: sha256Hex,
      workflow: (name) => this.workflows.get(name),
      ...(offer ? { offer } : {}),
    };
  }

  /** Whether any installed tool is a sub-task tool. */
  hasSubtasks(): boolean {
    return [...this.tools.values()].some((tool) => subtaskRulesOf(tool) !== undefined);
  }

  /** A sub-task tool's tools are installed and none is a sub-task tool; its success criterion names one of them. */
  private checkSubtasks(): void {
    for (const tool of this.tools.values()) {
      const sub = subtaskRulesOf(tool);
      if (!sub) continue;
      for (const name of sub.tools) {
        if (!this.tools.has(name))
          throw new ToolDefinitionError(tool.name, `the sub-task's tool ${JSON.stringify(name)} is not installed`);
        if (subtaskRulesOf(this.tools.get(name)))
          throw new ToolDefinitionError(
            tool.name,
            `the sub-task's tool ${name} is itself a sub-task tool (one level only)`,
          );
      }
      if (sub.success && !sub.tools.includes(sub.success.tool))
        throw new ToolDefinitionError(
          tool.name,
          `the sub-task's success criterion names ${sub.success.tool}, which is not one of its tools`,
        );
    }
  }

  /**
   * A write's `dependsOn` names installed reads: a name that is not one (a typo, a write) would leave the write
   * depending on nothing while its author believes it is protected.
   */
  private checkDependencies(): void {
    for (const tool of this.tools.values()) {
      if (tool.effect !== 'write' || tool.dependsOn === undefined) continue;
      for (const name of tool.dependsOn) {
        if (this.tools.get(name)?.effect !== 'read') {
          throw new ToolDefinitionError(
            tool.name,
            `dependsOn names ${name}, which is not an installed read tool (installed reads: ${this.readNames().join(', ') || 'none'})`,
          );
        }
      }
    }
  }

  /** A write's compensation names an installed write: an undo that cannot run would leave its effect standing. */
  private checkCompensations(): void {
    for (const tool of this.tools.values()) {
      if (tool.effect !== 'write' || tool.compensation === undefined) continue;
      const undo = this.tools.get(tool.compensation.tool);
      if (undo?.effect !== 'write') {
        throw new ToolDefinitionError(
          tool.name,
          `compensation names ${tool.compensation.tool}, which is not an installed write tool (installed writes: ${
            [...this.tools.values()]
              .filter((t) => t.effect === 'write' && t.name !== tool.name)
              .map((t) => t.name)
              .join(', ') || 'none'
          })`,
        );
      }
    }
  }

  private readNames(): string[] {
    return [...this.tools.values()].filter((tool) => tool.effect === 'read').map((tool) => tool.name);
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name);
  }

  /** The last named segment of every sensitive argument path of the installed tools ("card_number"). */
  sensitiveArgumentNames(): string[] {
    return [...this.tools.values()].flatMap((tool) =>
      (tool.sensitive?.args ?? []).map(
        (path) =>
          path
            .split('.')
            .filter((s) => s !== '*')
            .at(-1) ?? path,
      ),
    );
  }

  get names(): string[] {
    return [...this.tools.keys()];
  }

  /** Data-only facts persisted in the task (the machine decides grouping and retries from them). */
  catalog(): Catalog {
    const catalog: Catalog = {};
    for (const tool of this.tools.values()) {
      catalog[tool.name] = {
        effect: tool.effect,
        sameKeyRetrySafe: tool.effect === 'write' && tool.sameKeyRetrySafe,
        version: this.versionOf(tool),
      };
    }
    return catalog;
  }

  /** How the tools installed here differ from a task's catalog (`catalogBinding.ts`): empty when they may drive it. */
  differences(catalog: Catalog): CatalogDifference[] {
    return catalogDifferences(catalog, (name) => {
      const tool = this.tools.get(name);
      return tool && { effect: tool.effect, version: this.versionOf(tool), compatibleWith: tool.compatibleWith ?? [] };
    });
  }

  /** The tool's version, computed on first use; none when the tool's declarations cannot be read. */
  private versionOf(tool: Tool): string | undefined {
    if (!this.versions.has(tool.name)) {
      let version: string | undefined;
      try {
        version = toolVersion(tool, sha256Hex);
      } catch {
        version = undefined;
      }
      if (version !== undefined) this.versions.set(tool.name, version);
      return version;
    }
    return this.versions.get(tool.name);
  }

  /** The tools a principal may use (holds every required scope): the only ones offered to the model. */
  offeredTo(principal: Readonly<Principal>): OfferedTool[] {
    // Asked every model turn: one array, not three.
    const offered: OfferedTool[] = [];
    for (const tool of this.tools.values()) {
      if (!hasScopes(principal, tool.scopes)) continue;
      offered.push({
        name: tool.name,
        description: tool.description,
        parameters: this.schemas.get(tool.name)!,
        effect: tool.effect,
      });
    }
    return offered;
  }
}

/**
 * The gates' view of a tool, read through to the tool itself: a host that changes a tool's scopes or confirmation
 * rule after the orchestrator was made has every later call judged by the new ones.
 */
function rulesOf(tool: Tool, privacy: Privacy, refreshesSession: () => boolean): ToolRules {
  // One function per hook (the gates keep a verdict per call and hook function), reading the tool when asked.
  const validateNow: SyncCheck = (call, context) => checkNow(privacy, tool, 'validate', call, context);
  const authorizeNow: SyncCheck = (call, context) => checkNow(privacy, tool, 'authorize', call, context);
  return {
    get name() {
      return tool.name;
    },
    get effect() {
      return tool.effect;
    },
    get input() {
      return tool.input;
    },
    get output() {
      return tool.output;
    },
    get parseInput() {
      return tool.sensitive?.args?.length ? sealedParse(tool.input, tool.sensitive.args, privacy) : undefined;
    },
    get parseOutput() {
      return tool.sensitive?.output?.length ? sealedParse(tool.output, tool.sensitive.output, privacy) : undefined;
    },
    get scopes() {
      return tool.scopes;
    },
    get validates() {
      return typeof tool.validate === 'function';
    },
    get authorizes() {
      return typeof tool.authorize === 'function';
    },
    get validateNow() {
      return tool.hooks === 'sync' && typeof tool.validate === 'function' ? validateNow : undefined;
    },
    get authorizeNow() {
      return tool.hooks === 'sync' && typeof tool.authorize === 'function' ? authorizeNow : undefined;
    },
    get recheckNow() {
      const hooked = typeof tool.validate === 'function' || typeof tool.authorize === 'function';
      return !refreshesSession() && tool.rateLimit === undefined && (!hooked || tool.hooks === 'sync');
    },
    get confirm() {
      return typeof tool.confirm === 'function' ? tool.confirm.bind(tool) : tool.confirm;
    },
    get confirmation() {
      return tool.confirmation;
    },
    get risk() {
      return tool.risk;
    },
    get untrustedOutput() {
      return tool.untrustedOutput;
    },
    get dependsOn() {
      return tool.effect === 'write' ? tool.dependsOn : undefined;
    },
    get mandate() {
      return tool.mandate?.bind(tool);
    },
    get amount() {
      return tool.effect === 'write' ? tool.amount?.bind(tool) : undefined;
    },
    get describeConfirmation() {
      return tool.describeConfirmation?.bind(tool);
    },
    get redact() {
      return tool.redact?.bind(tool);
    },
    get subtask() {
      return subtaskRulesOf(tool);
    },
    get compensation() {
      if (tool.effect !== 'write' || !tool.compensation) return undefined;
      const { tool: name, args } = tool.compensation;
      return { tool: name, args: args.bind(tool.compensation) };
    },
  };
}

/** True when the principal holds every scope in `required`. */
export function hasScopes(principal: Readonly<Principal>, required: readonly string[]): boolean {
  return required.every((scope) => principal.scopes.includes(scope));
}
