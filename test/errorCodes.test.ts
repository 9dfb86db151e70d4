/**
 * The closed list of error codes (`AgentErrorCode`): every error class of every entry carries a code from it, at the
 * type level (checked by `tsc --noEmit`, which covers this file) and at run time; every code the source throws with
 * is in it; no code shipped before is dropped from it.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as root from '../src/index.js';
import {
  AGENT_ERROR_CODES,
  AGENT_ERROR_CODE_LIST,
  AgentError,
  CapacityError,
  CatalogMismatchError,
  CorruptTaskError,
  EventPendingError,
  FencedOutError,
  HostRequestError,
  MachineError,
  MandateUsedError,
  ForkNotAllowedError,
  ProcessOverloadedError,
  QueueFullError,
  RevisionConflictError,
  StoreDataLostError,
  StoreUnavailableError,
  TaskBusyError,
  TaskErasedError,
  TaskExistsError,
  TaskNotFoundError,
  TaskQuarantinedError,
  TaskRunningError,
  ToolDefinitionError,
  TransientModelError,
  TransientToolError,
  UnsupportedVersionError,
  isAgentErrorCode,
  type AgentErrorCode,
  type CodedError,
} from '../src/index.js';
import * as redis from '../src/redis.js';
import * as openai from '../src/openai.js';
import * as aisdk from '../src/aisdk.js';
import * as otel from '../src/otel.js';
import * as mcp from '../src/mcp.js';
import * as bullmq from '../src/bullmq.js';
import * as inspect from '../src/inspect/index.js';
import * as testing from '../src/testing/index.js';
import * as visualize from '../src/visualize/index.js';
import * as http from '../src/http/index.js';
import * as acceptance from '../src/acceptance/index.js';
import { UsageError } from '../src/cli/runCli.js';
import { ModelAbortedError } from '../src/model/openai/openaiReply.js';
import { HandedBackError } from '../src/orchestrator/taskDriver.js';
import { TimeoutError } from '../src/runtime/timeouts.js';
import { LockTimeoutError } from '../src/store/file/fileIo.js';

const ENTRIES = { root, redis, openai, aisdk, otel, mcp, bullmq, inspect, testing, visualize, http, acceptance };

/** One instance of every error class an entry exports, or that the runtime throws from inside. */
const INSTANCES: Record<string, () => Error> = {
  AgentError: () => new AgentError('internal_error', 'x'),
  CapacityError: () => new CapacityError('tenant', 1, 't'),
  CatalogMismatchError: () => new CatalogMismatchError('t', []),
  CorruptTaskError: () => new CorruptTaskError('t', 'x'),
  EventPendingError: () => new EventPendingError('t', 'e', 1, 10),
  FencedOutError: () => new FencedOutError('t', 'x'),
  HostRequestError: () => new HostRequestError('invalid_event', 'x'),
  MachineError: () => new MachineError('t', 'x'),
  MandateUsedError: () => new MandateUsedError('m', 't'),
  ForkNotAllowedError: () => new ForkNotAllowedError('mandate', 'no'),
  QueueFullError: () => new QueueFullError('inbox', 1),
  RevisionConflictError: () => new RevisionConflictError('t', 1, 2),
  StoreDataLostError: () => new StoreDataLostError('p', 'n', 'a', null),
  StoreUnavailableError: () => new StoreUnavailableError('x'),
  TaskBusyError: () => new TaskBusyError('t'),
  TaskErasedError: () => new TaskErasedError('t', 0, 'x'),
  TaskExistsError: () => new TaskExistsError('t'),
  TaskNotFoundError: () => new TaskNotFoundError('t'),
  TaskQuarantinedError: () => new TaskQuarantinedError('t', 'x'),
  TaskRunningError: () => new TaskRunningError('t'),
  ToolDefinitionError: () => new ToolDefinitionError('t', 'x'),
  TransientModelError: () => new TransientModelError('x'),
  TransientToolError: () => new TransientToolError('x'),
  UnsupportedVersionError: () => new UnsupportedVersionError('t', 'x'),
  StoreLayoutError: () => new redis.StoreLayoutError('p', 1, '2'),
  ModelConfigError: () => new openai.ModelConfigError('x'),
  ModelRequestError: () => new openai.ModelRequestError(500, 'x'),
  AiSdkAbortedError: () => new aisdk.AiSdkAbortedError(),
  AiSdkConfigError: () => new aisdk.AiSdkConfigError('x'),
  AiSdkRequestError: () => new aisdk.AiSdkRequestError(500, 'x'),
  McpConnectionError: () => new mcp.McpConnectionError('x'),
  McpLookupUnavailableError: () => new mcp.McpLookupUnavailableError('t'),
  McpPolicyError: () => new mcp.McpPolicyError('t', 'x'),
  InspectorStartError: () => new inspect.InspectorStartError('x'),
  ScriptExhaustedError: () => new testing.ScriptExhaustedError(2, 1),
  ServiceError: () => new http.ServiceError(404, 'not_found', 'x'),
  ServiceOptionsError: () => new http.ServiceOptionsError('authenticate', 'x'),
  // Not exported: thrown and caught inside, or by the command-line tools.
  UsageError: () => new UsageError('x'),
  ModelAbortedError: () => new ModelAbortedError(),
  HandedBackError: () => new HandedBackError('t', 'x'),
  TimeoutError: () => new TimeoutError(1),
  LockTimeoutError: () => new LockTimeoutError('p', 'h'),
  ProcessOverloadedError: () => new ProcessOverloadedError(900, 'save'),
};

/** The codes of 0.4.0: a code once shipped stays (hosts and HTTP clients match on it). */
const SHIPPED = [
  'task_not_found',
  'task_erased',
  'task_exists',
  'revision_conflict',
  'fenced_out',
  'corrupt_task',
  'task_busy',
  'catalog_mismatch',
  'mandate_used',
  'unsupported_version',
  'task_quarantined',
  'store_unavailable',
  'machine_error',
  'invalid_request',
  'invalid_event',
  'invalid_tool_definition',
  'invalid_mcp_policy',
  'mcp_connection_failed',
  'mcp_lookup_unavailable',
  'task_running',
  'store_data_lost',
  'overloaded',
  'tenant_at_capacity',
  'queue_full',
  'event_pending',
  'model_request_failed',
  'model_not_configured',
  'task_handed_back',
  'usage',
  'store_layout_mismatch',
  'script_exhausted',
  'inspector_start_failed',
  'duplicate_tool',
  'task_stopped',
  'orchestrator_closed',
  'orchestrator_draining',
  'erasure_unsupported',
  'task_not_live',
  'start_failed',
  'settle_timeout',
  'invalid_mandate_kind',
  'invalid_host',
  'invalid_option',
  'internal_error',
  'invalid_save',
  'invalid_lease_ttl',
  'missing_peer',
  'invalid_sealer_key',
  'invalid_redactor',
  'invalid_privacy_options',
  // the HTTP layer's
  'invalid_query',
  'invalid_last_event_id',
  'invalid_json',
  'body_too_large',
  'unsupported_media_type',
  'unauthenticated',
  'invalid_principal',
  'cross_origin',
  'csrf_token_invalid',
  'caller_cannot_set_rules',
  'start_request_invalid',
  'start_request_principal_mismatch',
  'not_found',
  'unknown_event_id',
  'not_taken',
  'not_stepping',
  'model_not_waiting',
  'rate_limited',
  'arguments_changed',
  'confirmation_expired',
  'wrong_user',
  'not_waiting_for_confirmation',
  'unknown_confirmation',
  'task_finished',
];

describe('AgentErrorCode', () => {
  it('types the code of every error class with a member of the union', () => {
    expectTypeOf<AgentError['code']>().toEqualTypeOf<AgentErrorCode>();
    expectTypeOf<CapacityError['code']>().toEqualTypeOf<'overloaded' | 'tenant_at_capacity'>();
    expectTypeOf<TaskNotFoundError['code']>().toEqualTypeOf<'task_not_found' | 'task_erased'>();
    expectTypeOf<HostRequestError['code']>().toEqualTypeOf<'invalid_request' | 'invalid_event'>();
    expectTypeOf<TransientToolError>().toExtend<CodedError>();
    expectTypeOf<TransientModelError>().toExtend<CodedError>();
    expectTypeOf<TimeoutError>().toExtend<CodedError>();
    expectTypeOf<LockTimeoutError>().toExtend<CodedError>();
    expectTypeOf<ModelAbortedError>().toExtend<CodedError>();
    expectTypeOf<aisdk.AiSdkAbortedError>().toExtend<CodedError>();
    expectTypeOf<http.ServiceOptionsError>().toExtend<CodedError>();
    // The service's own ServiceErrors; a host's startRequest may choose its own code.
    expectTypeOf<http.ServiceError['code']>().toEqualTypeOf<http.HttpErrorCode>();
    // @ts-expect-error: a code outside the union does not compile
    new AgentError('no_such_code', 'x');
  });

  it('checks a switch over the codes for exhaustiveness', () => {
    const kind = (error: AgentError): string => {
      switch (error.code) {
        case 'task_busy':
        case 'store_unavailable':
          return 'retry';
        default: {
          const rest: Exclude<AgentErrorCode, 'task_busy' | 'store_unavailable'> = error.code;
          return rest;
        }
      }
    };
    expect(kind(new TaskBusyError('t'))).toBe('retry');
    expect(kind(new TaskExistsError('t'))).toBe('task_exists');
  });

  it('lists each code once, with no empty group', () => {
    expect(new Set(AGENT_ERROR_CODE_LIST).size).toBe(AGENT_ERROR_CODE_LIST.length);
    for (const [group, codes] of Object.entries(AGENT_ERROR_CODES)) expect(codes.length, group).toBeGreaterThan(0);
    for (const code of AGENT_ERROR_CODE_LIST) expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
    expect(isAgentErrorCode('task_busy')).toBe(true);
    expect(isAgentErrorCode('nope')).toBe(false);
    expect(isAgentErrorCode(42)).toBe(false);
  });

  it('keeps every code shipped before', () => {
    expect(SHIPPED.filter((code) => !isAgentErrorCode(code))).toEqual([]);
  });

  it('gives every error class exported by any entry a code from the list, at run time', () => {
    const exported = Object.values(ENTRIES).flatMap((entry) =>
      Object.entries(entry)
        .filter(
          ([, value]) => typeof value === 'function' && (value as { prototype?: unknown }).prototype instanceof Error,
        )
        .map(([name]) => name),
    );
    // A new error class must be added to INSTANCES, and so checked here.
    expect([...new Set(exported)].filter((name) => !(name in INSTANCES))).toEqual([]);
    for (const [name, make] of Object.entries(INSTANCES)) {
      const error = make() as Partial<CodedError>;
      expect(isAgentErrorCode(error.code), `${name}: ${String(error.code)}`).toBe(true);
    }
  });

  it('knows every literal code the source throws with', () => {
    const thrown = new Set<string>();
    const patterns = [
      /new (?:AgentError|HostRequestError)\(\s*'([a-z_]+)'/g,
      /super\(\s*'([a-z_]+)'/g,
      /serviceError\(\s*[^,]+,\s*'([a-z_]+)'/g,
      /code = '([a-z_]+)' as const/g,
      /\bparse\([^;]*?, '[^']*', '([a-z_]+)'\)/g,
      /\bcode: '([a-z_]+)', message:/g,
    ];
    for (const file of sourceFiles('src')) {
      const text = readFileSync(file, 'utf8');
      for (const pattern of patterns) for (const match of text.matchAll(pattern)) thrown.add(match[1]!);
    }
    expect(thrown.size).toBeGreaterThan(60);
    expect([...thrown].filter((code) => !isAgentErrorCode(code))).toEqual([]);
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith('.ts') ? [path] : [];
  });
}
