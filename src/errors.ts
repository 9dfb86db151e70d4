/**
 * The few errors thrown at the public API edge. Outcomes inside a task are data (codes), not exceptions.
 * Each has a stable `code` from `AgentErrorCode` and an actionable message.
 */
import type { AgentErrorCode, CodedError } from './errorCodes.js';

/**
 * The base of this package's errors. `C` narrows the code a subclass carries, so `switch (error.code)` on an
 * `AgentError` checks exhaustiveness, and on a `CapacityError` knows it is `overloaded` or `tenant_at_capacity`.
 */
export class AgentError<C extends AgentErrorCode = AgentErrorCode> extends Error implements CodedError<C> {
  readonly code: C;
  constructor(code: C, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export class TaskNotFoundError extends AgentError<'task_not_found' | 'task_erased'> {
  constructor(readonly taskId: string) {
    super('task_not_found', `Task ${JSON.stringify(taskId)} does not exist in this store.`);
  }
}

export class TaskExistsError extends AgentError<'task_exists'> {
  constructor(readonly taskId: string) {
    super('task_exists', `Task ${JSON.stringify(taskId)} already exists; choose another id or resume it.`);
  }
}

/** Another writer saved the task since it was read: reload before writing again. */
export class RevisionConflictError extends AgentError<'revision_conflict'> {
  constructor(
    readonly taskId: string,
    readonly expected: number,
    readonly actual: number | null,
  ) {
    super(
      'revision_conflict',
      `Task ${JSON.stringify(taskId)} is at revision ${actual ?? 'none'}, not ${expected}: another writer saved it first.`,
    );
  }
}

/** This process no longer holds the task's lease: its writes are refused. */
export class FencedOutError extends AgentError<'fenced_out'> {
  constructor(
    readonly taskId: string,
    detail: string,
  ) {
    super('fenced_out', `Task ${JSON.stringify(taskId)}: ${detail}. Another process drives it now.`);
  }
}

/** A stored task could not be read safely: corrupted, foreign, or of an unsupported version. */
export class CorruptTaskError extends AgentError<'corrupt_task'> {
  constructor(
    readonly taskId: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super('corrupt_task', `Task ${JSON.stringify(taskId)} cannot be restored: ${reason}`, options);
  }
}

/** Another process holds the task's lease (drives it now); retry later, or let recovery take it when it expires. */
export class TaskBusyError extends AgentError<'task_busy'> {
  constructor(readonly taskId: string) {
    super(
      'task_busy',
      `Task ${JSON.stringify(taskId)} is being driven by another process; retry when its lease is released or expires.`,
    );
  }
}

/** How one tool of a task's catalog differs from the tools this process has (`CatalogMismatchError`). */
export interface CatalogDifference {
  tool: string;
  /** Not installed here; installed with another effect; installed in a version that cannot stand in for the task's. */
  problem: 'missing' | 'effect' | 'version';
  /** What the task recorded when it started (effect or version; null when it recorded none). */
  task: string | null;
  /** What is installed here (null when missing, or when its version cannot be computed). */
  here: string | null;
}

/**
 * This process's tools are not the ones the task was started with (its catalog): a tool is missing, has another
 * effect, or is in a version that does not declare it can stand in for the task's (`compatibleWith`). The task is
 * not driven here: nothing happened to it, and a process that has its tools drives it (a dispatch job goes back to
 * the queue; recovery reports it; an API call answers with this). Install the tools, or declare the upgrade.
 */
export class CatalogMismatchError extends AgentError<'catalog_mismatch'> {
  constructor(
    readonly taskId: string,
    readonly differences: readonly CatalogDifference[],
  ) {
    const shown = differences.map((d) =>
      d.problem === 'missing'
        ? `${d.tool} is not installed`
        : `${d.tool} is ${d.problem === 'effect' ? 'a' : 'in version'} ${d.here ?? 'unknown'}${d.problem === 'effect' ? ' tool' : ''} here, ${d.task ?? 'unknown'} in the task`,
    );
    super(
      'catalog_mismatch',
      `Task ${JSON.stringify(taskId)} was started with tools this process does not have as they were (${shown.join('; ')}); it is left to a process that has them. Install them, or declare a compatible upgrade with the tool's compatibleWith.`,
    );
  }
}

/**
 * The start's mandate already authorised another task: a mandate authorises one task (it is claimed in the store
 * when the task starts). Nothing was stored for this start. Make a mandate per request with
 * `defineMandate(...).of(terms)`; a retried start of the same task (same `taskId`) is not refused by its own claim.
 */
export class MandateUsedError extends AgentError<'mandate_used'> {
  constructor(
    readonly mandateId: string,
    readonly taskId: string,
  ) {
    super(
      'mandate_used',
      `Mandate ${JSON.stringify(mandateId)} already authorised another task, so it cannot start task ${JSON.stringify(taskId)}: a mandate authorises one task. Make one per request with defineMandate(...).of(terms).`,
    );
  }
}

export class UnsupportedVersionError extends AgentError<'unsupported_version'> {
  constructor(
    readonly taskId: string,
    detail: string,
  ) {
    super('unsupported_version', `Task ${JSON.stringify(taskId)}: ${detail}`);
  }
}

export class TaskQuarantinedError extends AgentError<'task_quarantined'> {
  constructor(
    readonly taskId: string,
    readonly reason: string,
  ) {
    super('task_quarantined', `Task ${JSON.stringify(taskId)} is quarantined: ${reason}`);
  }
}

/**
 * The store could not be reached or answered with an error. After a timeout or a dropped connection a write may
 * still have landed: the runtime checks for its own write before treating a retry's conflict as fatal.
 */
export class StoreUnavailableError extends AgentError<'store_unavailable' | 'process_overloaded'> {
  constructor(detail: string, options?: { cause?: unknown }) {
    super('store_unavailable', `The task store is unavailable: ${detail}`, options);
  }
}

/**
 * A store command timed out while this process's event loop was blocked: the store may be fine, the process is
 * overloaded (too much work at once). A `StoreUnavailableError` (so what retries a store blip retries this), with
 * its own code and message, so that nobody goes looking for a Redis outage.
 */
export class ProcessOverloadedError extends StoreUnavailableError {
  override readonly code = 'process_overloaded' as const;
  constructor(
    readonly blockedMs: number,
    action: string,
    options?: { cause?: unknown },
  ) {
    super(action, options);
    this.message =
      `This process is overloaded: its event loop was blocked for ${Math.round(blockedMs)} ms while the ${action} ` +
      'waited, so the command timed out here, not in the store. Start fewer tasks at once (capacity options), or ' +
      'run more processes.';
  }
}

/**
 * The agent machine threw while handling an event (a guard or an action failed: a bug, or a host function the
 * gates call that broke every rule). Nothing after the last save happened durably; the task is quarantined with
 * this message so that recovery does not run it into the same failure again.
 */
export class MachineError extends AgentError<'machine_error'> {
  constructor(
    readonly taskId: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      'machine_error',
      `Task ${JSON.stringify(taskId)}: the agent machine failed (${detail}); it is quarantined`,
      options,
    );
  }
}

/** An event or request from the host was malformed or not allowed for this task. */
export class HostRequestError extends AgentError<'invalid_request' | 'invalid_event'> {}

export class ToolDefinitionError extends AgentError<'invalid_tool_definition'> {
  constructor(tool: string, detail: string) {
    super('invalid_tool_definition', `Tool ${JSON.stringify(tool)} is not a valid definition: ${detail}`);
  }
}

/** An MCP tool's host policy cannot be applied to what the server offers (a bad field, a contradiction, a loose write). */
export class McpPolicyError extends AgentError<'invalid_mcp_policy'> {
  constructor(
    readonly tool: string,
    detail: string,
  ) {
    super('invalid_mcp_policy', `MCP tool ${JSON.stringify(tool)}: ${detail}`);
  }
}

/** The MCP server could not be reached, or answered the handshake or tool listing with something unusable. */
export class McpConnectionError extends AgentError<'mcp_connection_failed'> {
  constructor(detail: string, options?: { cause?: unknown }) {
    super('mcp_connection_failed', `MCP server: ${detail}`, options);
  }
}

/**
 * Thrown by the lookup of an MCP write whose host gave no lookup: nobody can say whether it took effect, so the
 * lookup is inconclusive and the task waits for a reviewer; the write is never sent again on a guess.
 */
export class McpLookupUnavailableError extends AgentError<'mcp_lookup_unavailable'> {
  constructor(readonly tool: string) {
    super(
      'mcp_lookup_unavailable',
      `${tool} has no host lookup: whether the call took effect cannot be established here; a reviewer decides`,
    );
  }
}

/**
 * The task was erased (on request, or by a retention period): its data is gone and its id cannot be used again
 * while its tombstone is kept. A TaskNotFoundError, so code that treats a missing task as not found (the HTTP
 * layer's 404) keeps doing so; the code is `task_erased`.
 */
export class TaskErasedError extends TaskNotFoundError {
  constructor(
    override readonly taskId: string,
    readonly erasedAt: number,
    readonly reason: string,
  ) {
    super(taskId);
    // The parent's code and message say "does not exist"; this one says when it stopped existing.
    (this as { code: string }).code = 'task_erased';
    const when = Number.isNaN(new Date(erasedAt).getTime()) ? `${erasedAt} ms` : new Date(erasedAt).toISOString();
    this.message = `Task ${JSON.stringify(taskId)} was erased at ${when} (${reason}); its data is gone and the id cannot be used again.`;
  }
}

/** The task is running in this process: erase it once it waits or has finished, or ask to cancel it first. */
export class TaskRunningError extends AgentError<'task_running'> {
  constructor(readonly taskId: string) {
    super(
      'task_running',
      `Task ${JSON.stringify(taskId)} is running; erase it when it waits or has finished, or pass { cancelRunning: true }.`,
    );
  }
}

/**
 * The Redis data set the store was working on is gone or is another one: its epoch marker vanished (Redis restarted
 * without persistence, was flushed, failed over to an empty replica) or holds another epoch (flushed and used
 * again, restored from another data set). Not a StoreUnavailableError: no retry brings the data back, so a live task
 * stops, and a task whose records vanished is not created again in the empty data set. `acceptDataLoss()` on the
 * store carries on with the data set as it is now.
 */
export class StoreDataLostError extends AgentError<'store_data_lost'> {
  constructor(
    /** The store's key prefix. */
    readonly prefix: string,
    /** Where the store connects (host:port or socket path), without credentials. */
    readonly node: string,
    /** The epoch this store had learned. */
    readonly expected: string,
    /** The epoch found now; null when the marker is gone. */
    readonly found: string | null,
    /** What was refused ("save of task t-1"). */
    action?: string,
  ) {
    const what =
      found === null
        ? `vanished (epoch ${expected} expected, none found): Redis restarted without persistence or was flushed; ` +
          'the tasks stored before are gone'
        : `was replaced (epoch ${expected} expected, ${found} found): Redis was flushed and used again, restored from ` +
          'another data set, or failed over to a server that does not hold this one; the tasks stored before are not in it';
    super(
      'store_data_lost',
      `Redis at ${node}${action ? ` refused the ${action}` : ''}: the data set under {${prefix}} ${what}, and none is ` +
        'created again. Once you have checked, call acceptDataLoss() on the store to carry on with the data set as it is now.',
    );
  }
}

/** The capacity option a start was refused under (`CapacityError.limitName`). */
export type CapacityLimitName =
  'maxRunningTasks' | 'maxRunningPerTenant' | 'maxLoopDelayMs' | 'maxStartingTasks' | 'tenantCap';

/**
 * Refused before any work: this process drives as many running tasks as its `capacity` allows, in all (`scope:
 * 'process'`, retry later or elsewhere) or for the task's tenant (`scope: 'tenant'`); or it has as many starts under
 * way as it takes at once (`maxStartingTasks`); or its event loop lags (`maxLoopDelayMs`); or the tenant has as many
 * running tasks across every process on the store as `tenantCap` allows (`scope: 'tenant'`). `limitName` names the
 * option. Nothing was stored.
 */
export class CapacityError extends AgentError<'overloaded' | 'tenant_at_capacity'> {
  /** The capacity option the start was refused under. */
  readonly limitName: CapacityLimitName;

  constructor(
    readonly scope: 'process' | 'tenant',
    readonly limit: number,
    readonly tenantId: string,
    /** Refused because the event loop lagged this long lately (`capacity.maxLoopDelayMs`), not for a count. */
    readonly loopDelayMs?: number,
    limitName?: CapacityLimitName,
  ) {
    const name: CapacityLimitName =
      limitName ??
      (loopDelayMs !== undefined ? 'maxLoopDelayMs' : scope === 'process' ? 'maxRunningTasks' : 'maxRunningPerTenant');
    super(
      scope === 'process' ? 'overloaded' : 'tenant_at_capacity',
      capacityMessage(name, limit, tenantId, loopDelayMs),
    );
    this.limitName = name;
  }
}

function capacityMessage(name: CapacityLimitName, limit: number, tenantId: string, loopDelayMs?: number): string {
  switch (name) {
    case 'maxLoopDelayMs':
      return `This process's event loop lagged ${Math.round(loopDelayMs ?? 0)} ms in the last second (capacity.maxLoopDelayMs: ${limit}): it is too busy to take a new task; try again shortly or on another instance.`;
    case 'maxStartingTasks':
      return `This process already has ${limit} starts under way (capacity.maxStartingTasks): it takes no more at once; try again shortly or on another instance.`;
    case 'maxRunningTasks':
      return `This process already drives ${limit} running tasks (capacity.maxRunningTasks); try again later or on another instance.`;
    case 'tenantCap':
      return `Tenant ${JSON.stringify(tenantId)} already has ${limit} running tasks across every process (capacity.tenantCap); try again when one waits or ends.`;
    case 'maxRunningPerTenant':
      return `Tenant ${JSON.stringify(tenantId)} already has ${limit} running tasks here (capacity.maxRunningPerTenant); try again when one waits or ends.`;
  }
}

/**
 * Refused before anything was recorded: the dispatch queue holds more waiting jobs than its `maxQueueDepth`
 * (`scope: 'queue'`), or the task's inbox holds as many unapplied events as it may (`scope: 'inbox'`). Retry later.
 */
export class QueueFullError extends AgentError<'queue_full'> {
  constructor(
    readonly scope: 'queue' | 'inbox',
    readonly limit: number,
  ) {
    super(
      'queue_full',
      scope === 'queue'
        ? `The dispatch queue already holds ${limit} or more waiting jobs (maxQueueDepth); try again later.`
        : `The task's inbox already holds ${limit} events not yet applied; try again when its driver has caught up.`,
    );
  }
}

/**
 * The event is recorded durably and will be applied, in order, by the process that drives the task, but its reply
 * did not come within the wait (`replyTimeoutMs`): not a failure. Read the task's status (or its audit) later.
 */
export class EventPendingError extends AgentError<'event_pending'> {
  constructor(
    readonly taskId: string,
    readonly eventId: string,
    readonly seq: number,
    waitedMs: number,
  ) {
    super(
      'event_pending',
      `The event ${eventId} for task ${JSON.stringify(taskId)} is recorded (inbox position ${seq}) and will be applied, but no worker applied it within ${waitedMs} ms; read the task's status later.`,
    );
  }
}
