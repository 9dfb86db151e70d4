/**
 * Gate (a), protocol: decided on the whole batch before anything in it runs. Pure.
 *
 * - Call ids must be present and unique, or results could not be paired with calls: the batch is unusable and
 *   the model is re-asked (a bounded number of times).
 * - Every tool must be known, every argument text must be a JSON object without duplicate keys and within the
 *   size limit, and the batch within the call limit: otherwise the whole batch is rejected, every call gets a
 *   paired result, and nothing runs.
 */
import type { ProposedCall } from '../events.js';
import type { Catalog, Json, Policy } from '../context.js';
import { isJsonObject, parseStrictJson, utf8Length } from './strictJson.js';

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
  // Runs once per proposal (every round): plain loops, the ids seen kept in a list while the batch is short (a set
  // only for a long one), and the per-call problems' list made only once there is a problem.
  const idProblems: ProtocolProblem[] = [];
  const ids: string[] = [];
  const seen = calls.length > 16 ? new Set<string>() : null;
  for (let index = 0; index < calls.length; index++) {
    const call = calls[index]!;
    const id = call.callId?.trim() ?? '';
    if (id === '' || id.length > MAX_CALL_ID_LENGTH) {
      idProblems.push({
        index,
        callId: call.callId ?? null,
        code: 'missing_call_id',
        summary: `call #${index + 1} (${call.name}) has no usable call id`,
      });
    } else if (seen ? seen.has(id) : ids.includes(id)) {
      idProblems.push({
        index,
        callId: id,
        code: 'duplicate_call_id',
        summary: `call id ${JSON.stringify(id)} is used by more than one call`,
      });
    } else if (seen) {
      seen.add(id);
    } else {
      ids.push(id);
    }
  }
  if (idProblems.length > 0) return { kind: 'unpairable', problems: idProblems };

  // Each call's own problem, the list made at the first one (no closure per proposal).
  let own: (ProtocolProblem | null)[] | null = null;
  const accepted: AcceptedCall[] = [];
  for (let index = 0; index < calls.length; index++) {
    const call = calls[index]!;
    const callId = call.callId!.trim();
    if (!Object.hasOwn(catalog, call.name)) {
      own = withProblem(
        own,
        calls.length,
        index,
        callId,
        'unknown_tool',
        `there is no tool named ${JSON.stringify(truncate(call.name, 64))}`,
      );
      continue;
    }
    const bytes = utf8Length(call.arguments);
    if (bytes > policy.maxArgumentBytes) {
      const summary = `arguments are ${bytes} bytes; the limit is ${policy.maxArgumentBytes}`;
      own = withProblem(own, calls.length, index, callId, 'arguments_too_large', summary);
      continue;
    }
    const parsed = parseStrictJson(call.arguments);
    if (!parsed.ok) {
      const code = parsed.code === 'duplicate_key' ? 'duplicate_key' : 'malformed_arguments';
      own = withProblem(own, calls.length, index, callId, code, `arguments are not valid JSON: ${parsed.message}`);
      continue;
    }
    if (!isJsonObject(parsed.value)) {
      own = withProblem(own, calls.length, index, callId, 'malformed_arguments', 'arguments must be a JSON object');
      continue;
    }
    accepted.push({ callId, tool: call.name, args: parsed.value, rawArguments: call.arguments });
  }

  const tooMany = calls.length > policy.maxCallsPerBatch;
  const ownProblems = own as (ProtocolProblem | null)[] | null;
  if (!tooMany && ownProblems === null) return { kind: 'accepted', calls: accepted };

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
      ownProblems?.[index] ?? {
        index,
        callId,
        code: 'batch_rejected',
        summary: 'not run: another call in the same batch was rejected at the protocol gate',
      }
    );
  });
  return { kind: 'rejected', problems };
}

function withProblem(
  own: (ProtocolProblem | null)[] | null,
  length: number,
  index: number,
  callId: string,
  code: ProtocolCode,
  summary: string,
): (ProtocolProblem | null)[] {
  const list = own ?? new Array<ProtocolProblem | null>(length).fill(null);
  list[index] = { index, callId, code, summary };
  return list;
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
