/**
 * The tools an orchestrator knows, with the derived views the machine and the model need.
 */
import type { Catalog, Principal } from '../../machines/agentTypes.js';
import { AgentError } from '../errors.js';
import type { OfferedTool } from '../model/agentModel.js';
import { type Tool, defineTool, toolParametersSchema } from '../tool.js';

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly schemas = new Map<string, Record<string, unknown>>();

  constructor(tools: readonly Tool[]) {
    for (const tool of tools) {
      if (this.tools.has(tool.name)) throw new AgentError('duplicate_tool', `two tools are named ${JSON.stringify(tool.name)}`);
      defineTool(tool as never);
      this.tools.set(tool.name, tool);
      this.schemas.set(tool.name, toolParametersSchema(tool));
    }
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name);
  }

  get names(): string[] {
    return [...this.tools.keys()];
  }

  /** Data-only facts persisted in the task (the machine decides grouping and retries from them). */
  catalog(): Catalog {
    const catalog: Catalog = {};
    for (const tool of this.tools.values()) {
      catalog[tool.name] = { effect: tool.effect, sameKeyRetrySafe: tool.effect === 'write' && tool.sameKeyRetrySafe };
    }
    return catalog;
  }

  /** The tools a principal may use (holds every required scope): the only ones offered to the model. */
  offeredTo(principal: Readonly<Principal>): OfferedTool[] {
    return [...this.tools.values()]
      .filter((tool) => hasScopes(principal, tool.scopes))
      .map((tool) => ({
        name: tool.name,
        description: tool.description,
        parameters: this.schemas.get(tool.name)!,
        effect: tool.effect,
      }));
  }
}

/** True when the principal holds every scope in `required`. */
export function hasScopes(principal: Readonly<Principal>, required: readonly string[]): boolean {
  return required.every((scope) => principal.scopes.includes(scope));
}
