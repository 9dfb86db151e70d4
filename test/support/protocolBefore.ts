/**
 * Gate (a), protocol: decided on the whole batch before anything in it runs. Pure.
 *
 * - Call ids must be present and unique, or results could not be paired with calls: the batch is unusable and
 *   the model is re-asked (a bounded number of times).
 * - Every tool must be known, every argument text must be a JSON object without duplicate keys and within the
 *   size limit, and the batch within the call limit: otherwise the whole batch is rejected, every call gets a
 *   paired result, and nothing runs.
 */
import type { ProposedCall } from '../../machines/events.js';
import type { Catalog, Json, Policy } from '../../machines/context.js';
import { isJsonObject, parseStrictJson, utf8Length } from './strictJsonBefore.js';

export type ProtocolCode =
  | 'missing_call_id'
  | 'duplicate_call_id'
  | 'too_many_calls'
  | 'unknown_tool'
  | 'malformed_arguments'
  | 'duplicate_key'
  | 'arguments_too_large'
  | 'batch_rejected';

export interface ProtocolProblem {
  index: number;
  callId: string | null;
  code: ProtocolCode;
  summary: string;
}

export interface AcceptedCall {
  callId: string;
  tool: string;
  args: Json;
  rawArguments: string;
}

export type ProtocolVerdict =
  /** Ids missing or duplicated: results cannot be paired. */
  | { kind: 'unpairable'; problems: ProtocolProblem[] }
  /** Pairable but rejected as a whole: one problem per call (its own, or batch_rejected). */
  | { kind: 'rejected'; problems: ProtocolProblem[] }
  | { kind: 'accepted'; calls: AcceptedCall[] };

const MAX_CALL_ID_LENGTH = 256;

/**
 * The verdict for one proposal, computed once: the guards and the action of the same transition all ask for it,
 * and it parses every argument text. Cached per calls array, valid only for the same catalog and policy.
 */
const verdicts = new WeakMap<ProposedCall[], { catalog: Catalog; policy: Policy; verdict: ProtocolVerdict }>();

export function protocolVerdict(calls: ProposedCall[], catalog: Catalog, policy: Policy): ProtocolVerdict {
  const cached = verdicts.get(calls);
  if (cached && cached.catalog === catalog && cached.policy === policy) return cached.verdict;
  const verdict = checkProtocol(calls, catalog, policy);
  verdicts.set(calls, { catalog, policy, verdict });
  return verdict;
}

export function checkProtocol(calls: ProposedCall[], catalog: Catalog, policy: Policy): ProtocolVerdict {
  const idProblems: ProtocolProblem[] = [];
  const seen = new Set<string>();
  calls.forEach((call, index) => {
    const id = call.callId?.trim() ?? '';
    if (id === '' || id.length > MAX_CALL_ID_LENGTH) {
      idProblems.push({
        index,
        callId: call.callId ?? null,
        code: 'missing_call_id',
        summary: `call #${index + 1} (${call.name}) has no usable call id`,
      });
    } else if (seen.has(id)) {
      idProblems.push({
        index,
        callId: id,
        code: 'duplicate_call_id',
        summary: `call id ${JSON.stringify(id)} is used by more than one call`,
      });
    } else {
      seen.add(id);
    }
  });
  if (idProblems.length > 0) return { kind: 'unpairable', problems: idProblems };

  const own: (ProtocolProblem | null)[] = [];
  const accepted: AcceptedCall[] = [];
  for (const [index, call] of calls.entries()) {
    const callId = call.callId!.trim();
    const problem = (code: ProtocolCode, summary: string): ProtocolProblem => ({ index, callId, code, summary });
    if (!Object.hasOwn(catalog, call.name)) {
      own.push(problem('unknown_tool', `there is no tool named ${JSON.stringify(truncate(call.name, 64))}`));
      continue;
    }
    const bytes = utf8Length(call.arguments);
    if (bytes > policy.maxArgumentBytes) {
      own.push(problem('arguments_too_large', `arguments are ${bytes} bytes; the limit is ${policy.maxArgumentBytes}`));
      continue;
    }
    const parsed = parseStrictJson(call.arguments);
    if (!parsed.ok) {
      const code = parsed.code === 'duplicate_key' ? 'duplicate_key' : 'malformed_arguments';
      own.push(problem(code, `arguments are not valid JSON: ${parsed.message}`));
      continue;
    }
    if (!isJsonObject(parsed.value)) {
      own.push(problem('malformed_arguments', 'arguments must be a JSON object'));
      continue;
    }
    own.push(null);
    accepted.push({ callId, tool: call.name, args: parsed.value, rawArguments: call.arguments });
  }

  const tooMany = calls.length > policy.maxCallsPerBatch;
  if (!tooMany && own.every((p) => p === null)) return { kind: 'accepted', calls: accepted };

  const problems = calls.map((call, index): ProtocolProblem => {
    const callId = call.callId!.trim();
    if (tooMany) {
      return {
        index,
        callId,
        code: 'too_many_calls',
        summary: `the batch has ${calls.length} calls; at most ${policy.maxCallsPerBatch} are allowed`,
      };
    }
    return (
      own[index] ?? {
        index,
        callId,
        code: 'batch_rejected',
        summary: 'not run: another call in the same batch was rejected at the protocol gate',
      }
    );
  });
  return { kind: 'rejected', problems };
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
