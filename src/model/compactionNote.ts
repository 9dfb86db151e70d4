/**
 * The facts of compacted turns, as the text of one host note: each call's tool, the identifiers its arguments
 * named, its outcome code and, for a success, the fields and identifiers its result named; the user's answers; the
 * model's refusals; the latest plan progress. Pure and deterministic.
 *
 * Tool output is untrusted data and never enters the note as text: only scalar fields whose value is a single short
 * token (`status=confirmed`, `amount_cents=19900`), identifiers (`identifiersOf`), counts of lists, and outcome codes.
 * A tool's failure summary (its own words) is left out, also from the plan progress.
 */
import type { Observation } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import type { Json } from '../../machines/lib/strictJson.js';
import { identifiersOf } from '../../machines/lib/observedFacts.js';
import { hostNotes } from './replyRules.js';

/** A field name worth keeping: a plain key, as a tool's output schema names it. */
const KEY = /^[A-Za-z_][A-Za-z0-9_]{0,39}$/;
/** A string value kept as a field: one token without spaces, quotes or brackets (an enum, a date, an id). */
const TOKEN = /^[\w.:+-]{1,40}$/;
/** An outcome code as the host or a tool names it. */
const CODE = /^[\w.-]{1,64}$/;

const FIELDS_PER_CALL = 6;
const IDS_PER_CALL = 8;
const ARG_IDS_PER_CALL = 4;
const TEXT_CAP = 200;
const ANSWERS_KEPT = 8;
const REFUSALS_KEPT = 8;
const PLAN_CAP = 1_500;
/** Calls that did not succeed, listed each on its own line even when the others are folded. */
const FAILURES_KEPT = 8;

type ResultOf = (turn: number, call: { callId: string; tool: string }) => Observation;

interface CallFact {
  turn: number;
  tool: string;
  code: string;
  /** Every identifier its result named (successes only), for the folded line. */
  ids: string[];
  line: string;
}

/**
 * The note's text for the compacted `entries` (whole turns, oldest first), within about `maxChars` characters: when
 * the calls do not fit one line each, the oldest are folded into one line of counts and the identifiers they named.
 */
export function compactionNote(entries: readonly TranscriptEntry[], resultOf: ResultOf, maxChars: number): string {
  return hostNotes.compacted(compactionNoteBody(entries, resultOf, maxChars));
}

/** The note's text without its host label: the `facts` summary of the chart's `compacting` (summarise.ts). */
export function compactionNoteBody(entries: readonly TranscriptEntry[], resultOf: ResultOf, maxChars: number): string {
  const calls: CallFact[] = [];
  const answers: string[] = [];
  const refusals: string[] = [];
  let unusable = 0;
  let plan: { turn: number; text: string } | null = null;
  let question: string | null = null;
  const turns: number[] = [];
  for (const entry of entries) {
    if ('turn' in entry) turns.push(entry.turn);
    switch (entry.kind) {
      case 'proposal':
        for (const call of entry.calls) calls.push(callFact(entry.turn, call, resultOf(entry.turn, call)));
        break;
      case 'question':
        question = entry.text;
        break;
      case 'user_answer':
        answers.push(
          `- ${question === null ? '' : `to the question ${quoted(question)}, `}the user answered ${quoted(entry.text)}`,
        );
        question = null;
        break;
      case 'no_answer':
        refusals.push(`- t${entry.turn}: nobody answered the question ${quoted(entry.question)}`);
        question = null;
        break;
      case 'refusal':
        refusals.push(`- t${entry.turn}: the model refused: ${quoted(entry.text)}`);
        break;
      case 'answer':
        refusals.push(`- t${entry.turn}: the model answered: ${quoted(entry.text)}`);
        break;
      case 'invalid_output':
        unusable += 1;
        break;
      case 'plan_progress':
        plan = { turn: entry.turn, text: planFacts(entry.text) };
        break;
      default:
        break;
    }
  }
  const first = turns.length ? Math.min(...turns) : 0;
  const last = turns.length ? Math.max(...turns) : 0;
  const fixed: string[] = [
    `To keep this conversation within the model's context, the host replaced turns ${first}-${last} ` +
      `(${calls.length} tool call${calls.length === 1 ? '' : 's'}) with the facts it recorded from them. ` +
      'Tool outputs are not repeated: each call is listed as turn, tool(identifiers in its arguments) → outcome code, ' +
      'and for a success the fields and identifiers its result named. Everything after this note is shown in full.',
  ];
  const tail: string[] = [];
  if (answers.length) tail.push("The user's answers:", ...answers.slice(-ANSWERS_KEPT));
  if (refusals.length || unusable)
    tail.push(
      'Other turns:',
      ...refusals.slice(-REFUSALS_KEPT),
      ...(unusable ? [`- ${unusable} output${unusable === 1 ? ' was' : 's were'} unusable and asked again`] : []),
    );
  if (plan) tail.push(`Plan progress (latest, turn ${plan.turn}):`, cut(plan.text, PLAN_CAP));
  const fixedChars = [...fixed, ...tail].reduce((n, line) => n + line.length + 1, 0);
  const callLines = calls.length ? ['Calls:', ...fittedCalls(calls, Math.max(0, maxChars - fixedChars - 7))] : [];
  return [...fixed, ...callLines, ...tail].join('\n');
}

/** One call's facts: the identifiers its arguments named, its outcome and, for a success, what its result named. */
function callFact(turn: number, call: { tool: string; arguments: string }, observation: Observation): CallFact {
  const tool = CODE.test(call.tool) ? call.tool : 'unnamed_tool';
  const argIds = identifiersOf(parsed(call.arguments)).slice(0, ARG_IDS_PER_CALL);
  const head = `- t${turn} ${tool}(${argIds.join(', ')})`;
  if (!observation.ok) {
    const code = CODE.test(observation.code) ? observation.code : 'failed';
    const said = observation.code === 'missing_result' ? ' (no result: assume it did not run)' : '';
    return { turn, tool, code, ids: [], line: `${head} → ${code}${said}` };
  }
  if (observation.truncated) return { turn, tool, code: 'ok', ids: [], line: `${head} → ok (output cut by the host)` };
  const { fields, ids } = resultFacts(observation.data);
  const named = [fields.join(', '), ids.length ? `ids ${ids.join(', ')}` : ''].filter(Boolean).join('; ');
  return {
    turn,
    tool,
    code: 'ok',
    ids: identifiersOf(observation.data),
    line: `${head} → ok${named ? `: ${named}` : ''}`,
  };
}

/** Scalar fields whose values are single tokens, list sizes, and the other identifiers of a result. */
function resultFacts(data: Json): { fields: string[]; ids: string[] } {
  const fields: string[] = [];
  const shown = new Set<string>();
  if (Array.isArray(data)) fields.push(`${data.length} item${data.length === 1 ? '' : 's'}`);
  else if (data !== null && typeof data === 'object') {
    for (const [key, value] of Object.entries(data)) {
      if (fields.length >= FIELDS_PER_CALL) break;
      if (!KEY.test(key)) continue;
      if (Array.isArray(value)) fields.push(`${key}: ${value.length} item${value.length === 1 ? '' : 's'}`);
      else if (typeof value === 'number' || typeof value === 'boolean' || value === null)
        fields.push(`${key}=${String(value)}`);
      else if (typeof value === 'string' && TOKEN.test(value)) {
        fields.push(`${key}=${value}`);
        shown.add(value);
      }
    }
  }
  const ids = identifiersOf(data).filter((id) => !shown.has(id));
  const more = ids.length - IDS_PER_CALL;
  return { fields, ids: more > 0 ? [...ids.slice(0, IDS_PER_CALL), `+${more} more`] : ids };
}

/**
 * One line per call, newest kept whole: when they do not fit in `room` characters, the oldest are folded into one
 * line of counts per tool and outcome with the identifiers they named (all of them when they fit, else the newest).
 */
function fittedCalls(calls: readonly CallFact[], room: number): string[] {
  // A call that did not succeed keeps its own line (the newest FAILURES_KEPT): what failed, or is unknown, stays named.
  const failed = calls.filter((c) => c.code !== 'ok').slice(-FAILURES_KEPT);
  const kept = new Set(failed);
  const foldable = calls.filter((c) => !kept.has(c));
  const failedChars = failed.reduce((n, c) => n + c.line.length + 1, 0);
  const ordered = (folded: readonly CallFact[]) => calls.filter((c) => !folded.includes(c)).map((c) => c.line);
  const lengths = foldable.map((c) => c.line.length + 1);
  let whole = lengths.reduce((a, b) => a + b, 0) + failedChars;
  if (whole <= room) return calls.map((c) => c.line);
  const counts = new Map<string, number>();
  const ids: string[] = [];
  const seen = new Set<string>();
  for (let folded = 1; folded <= foldable.length; folded += 1) {
    const call = foldable[folded - 1]!;
    whole -= lengths[folded - 1]!;
    const key = `${call.tool} ${call.code}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    for (const id of call.ids) {
      if (id.startsWith('+') || seen.has(id)) continue;
      seen.add(id);
      ids.push(id);
    }
    const summary = foldedLine(foldable[0]!.turn, call.turn, folded, counts);
    // Every identifier named is worth more than a line per call: fold on until they all fit, or all calls are folded.
    if (summary.length + 1 + idList(ids, Infinity).length + whole > room && folded < foldable.length) continue;
    const idRoom = room - whole - summary.length - 1;
    return [`${summary}${idList(ids, idRoom)}`, ...ordered(foldable.slice(0, folded))];
  }
  return failed.map((c) => c.line);
}

function foldedLine(from: number, to: number, n: number, counts: ReadonlyMap<string, number>): string {
  const tally = [...counts].map(([key, count]) => `${key}${count > 1 ? ` ×${count}` : ''}`).join(', ');
  return `- t${from}-t${to}, ${n} call${n === 1 ? '' : 's'}: ${tally}`;
}

/** `; ids ...` with the newest identifiers that fit in `room` characters, saying how many older ones are left out. */
function idList(ids: readonly string[], room: number): string {
  if (ids.length === 0) return '';
  const whole = `; ids their results named: ${ids.join(', ')}`;
  if (whole.length <= room) return whole;
  const kept: string[] = [];
  let used = '; ids their results named: '.length + 40;
  for (let i = ids.length - 1; i >= 0; i -= 1) {
    if (used + ids[i]!.length + 2 > room && kept.length > 0) break;
    kept.unshift(ids[i]!);
    used += ids[i]!.length + 2;
  }
  const left = ids.length - kept.length;
  return `; ids their results named: ${kept.join(', ')}${left ? ` (+${left} older not listed)` : ''}`;
}

/**
 * The plan's progress (machines/lib/plan.ts progressText) without a failed step's summary, a tool's own words:
 * `failed (code: text)` becomes `failed (code)`, and a line of another shape is left out.
 */
function planFacts(text: string): string {
  const [head = '', ...steps] = text.split('\n');
  const kept = steps.flatMap((line) => {
    if (!/^- \S+ \S+/.test(line)) return [];
    const failed = /^(- \S+ \S+: failed \()([\w.-]*)/.exec(line);
    return [failed ? `${failed[1]}${failed[2]})` : line];
  });
  return [cut(head, 80), ...kept].join('\n');
}

function parsed(text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return null;
  }
}

/** The model's or the user's own words, on one line, capped and quoted. */
function quoted(text: string): string {
  return JSON.stringify(cut(text.replace(/\s+/g, ' ').trim(), TEXT_CAP));
}

function cut(text: string, limit: number): string {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}
