/**
 * The long task: several hundred read rounds (a room's calendar, one day per round, one of them timing out), then a
 * search and one booking, under a model whose window is small (2,000 estimated tokens). The chart compacts the
 * conversation (`compacting`) each time it nears the threshold; the model is sent the goal, one host note (the facts
 * summary, and the host's facts: the mandate, the unknown read, the identifiers seen) and the newest turns. The model
 * here refuses any prompt past its window, as a provider does (`context_too_long`), and records the largest it got.
 */
import { z } from 'zod';
import { findAvailableRooms, type RoomSearchOutput } from '../../tools/findAvailableRooms.js';
import { type Booking, reserveRoom } from '../../tools/reserveRoom.js';
import { bookingMandate } from '../../tools/mandates.js';
import { type AgentModel, type ModelReply, createOrchestrator, defineTool } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply, scriptedModel } from '../../src/testing/index.js';
import type { ConversationCompaction } from '../../src/model/summariser.js';
import { buildMessages } from '../../src/model/openai/openaiMessages.js';
import { BookingService } from './bookingService.js';
import { BOOKING_GOAL, BOOKING_SUCCESS, BOOKING_TERMS, E17, MEETING } from './requests.js';
import type { ScenarioEnv, ScenarioResult } from './scenario.js';

/** Read rounds before the booking. */
export const LONG_ROUNDS = 300;
/** The model's window, in estimated tokens (characters / 4) of the messages after the system prompt. */
export const LONG_WINDOW = 2_000;
/** The round whose calendar read hangs: its outcome stays unknown to the end. */
export const UNKNOWN_DAY = 5;

const DAY0 = Date.UTC(2026, 0, 1);
const dayOf = (n: number) => new Date(DAY0 + n * 86_400_000).toISOString().slice(0, 10);

/** A read of one room's calendar for one day: its events, each with an id. */
function roomCalendar(hangOn: number) {
  return defineTool({
    name: 'room_calendar',
    description: "Lists a room's events on one day (ids, times, organiser). Read-only.",
    effect: 'read',
    scopes: ['rooms:read'],
    input: z.strictObject({ room_id: z.string(), day: z.iso.date() }),
    output: z.strictObject({
      room_id: z.string(),
      day: z.string(),
      events: z.array(
        z.strictObject({ event_id: z.string(), from: z.string(), to: z.string(), organiser: z.string() }),
      ),
    }),
    timeoutMs: 40,
    retry: { maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0 },
    async execute(args, ctx) {
      const n = Math.round((Date.parse(args.day) - DAY0) / 86_400_000);
      if (n === hangOn)
        return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted'))));
      const events = Array.from({ length: 1 + (n % 3) }, (_, i) => ({
        event_id: `EV-${args.room_id}-${String(n).padStart(3, '0')}${i}`,
        from: `${String(9 + 2 * i).padStart(2, '0')}:00`,
        to: `${String(10 + 2 * i).padStart(2, '0')}:00`,
        organiser: `E${100 + ((n * 7 + i) % 50)}`,
      }));
      return { ok: true, value: { room_id: args.room_id, day: args.day, events } };
    },
  });
}

/** The script: a calendar read per round, then the search, the booking and the answer. */
export function longScript(rounds = LONG_ROUNDS): ScriptStep[] {
  const step = (view: ScriptView): ModelReply => {
    const booking = view.data<Booking>('reserve_room');
    if (booking) return reply.answer(`Booked ${booking.room_id}: booking ${booking.booking_id}.`);
    const found = view.data<RoomSearchOutput>('find_available_rooms');
    if (found?.rooms[0]) {
      const room = found.rooms[0];
      return reply.call('reserve_room', {
        room_id: room.room_id,
        start_at: MEETING.start_at,
        end_at: MEETING.end_at,
        attendees: MEETING.attendees,
        expected_version: room.version,
      });
    }
    if (view.turn <= rounds) return reply.call('room_calendar', { room_id: 'R7', day: dayOf(view.turn) });
    return reply.call('find_available_rooms', { ...MEETING });
  };
  return Array.from({ length: rounds + 8 }, () => step);
}

/** A message's estimated tokens, as the adapters count them: its text and its calls, characters / 4, plus 4. */
function messageTokens(message: { content?: unknown; tool_calls?: unknown }): number {
  const text = typeof message.content === 'string' ? message.content.length : 0;
  const calls = Array.isArray(message.tool_calls)
    ? (message.tool_calls as { id: string; function: { name: string; arguments: string } }[]).reduce(
        (n, c) => n + c.id.length + c.function.name.length + c.function.arguments.length + 24,
        0,
      )
    : 0;
  return 4 + Math.ceil((text + calls) / 4);
}

/** What the windowed model saw: the largest prompt (estimated tokens) and the turns asked. */
export interface WindowLog {
  peak: number;
  prompts: number[];
  /** Each prompt's messages, when asked to keep them (tests). */
  messages?: { role: string; content?: unknown }[][];
}

/**
 * A scripted model with a small window: it rebuilds the messages as the OpenAI adapter does (the chart's summary and
 * the host's facts in place of older turns, and no bound of its own), refuses a prompt past `window` as a provider
 * does, and reports the prompt's size as its usage.
 */
export function windowedModel(script: ScriptStep[], window: number, log: WindowLog, keep = false): AgentModel {
  const inner = scriptedModel(script);
  return {
    name: 'scripted:windowed',
    reservation: { tokens: window + 500, costMicros: 0 },
    window: { maxPromptTokens: window, maxToolResultBytes: 2_048 },
    async decide(request) {
      const transcript = await request.transcript();
      const messages = buildMessages(transcript, request.principal, {
        maxToolResultBytes: 2_048,
        compaction: {
          maxTokens: Number.MAX_SAFE_INTEGER,
          maxToolResultBytes: 2_048,
          ...(request.summary ? { summary: request.summary } : {}),
        },
      }).slice(1);
      const tokens = messages.reduce((n, m) => n + messageTokens(m), 0);
      log.peak = Math.max(log.peak, tokens);
      log.prompts.push(tokens);
      if (keep) (log.messages ??= []).push(messages as { role: string; content?: unknown }[]);
      if (tokens > window)
        throw Object.assign(new Error(`the prompt has ${tokens} tokens; this model's window is ${window}`), {
          code: 'context_too_long',
        });
      const answer = await inner.decide(request);
      return { ...answer, usage: { inputTokens: tokens, outputTokens: 30 } };
    },
  };
}

export async function runLong(
  env: ScenarioEnv,
  rounds = env.longRounds ?? LONG_ROUNDS,
  log: WindowLog = { peak: 0, prompts: [] },
  compaction?: ConversationCompaction,
) {
  const service = new BookingService(undefined, env.clock ? () => env.clock!.now() : undefined);
  const script = longScript(rounds);
  const orchestrator = createOrchestrator({
    tools: [
      findAvailableRooms(service, { timeoutMs: 250 }),
      reserveRoom(service, { timeoutMs: 300 }),
      roomCalendar(UNKNOWN_DAY),
    ],
    mandates: [bookingMandate],
    model: env.model ? env.model(script) : windowedModel(script, LONG_WINDOW, log),
    store: env.store,
    clock: env.clock,
    inspect: env.inspect,
    ...(compaction ? { compaction } : {}),
    limits: { modelTurns: rounds + 10, toolCalls: rounds + 10, tokens: (rounds + 10) * 3_000 },
  });
  try {
    const status = await orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      mandate: bookingMandate.of(BOOKING_TERMS),
      taskId: 'long-1',
    });
    const result: ScenarioResult = {
      name: 'long',
      title: `A long task in a small window (${rounds} read rounds)`,
      expectation: `${rounds} calendar reads (one times out), then one booking, every prompt within ${LONG_WINDOW} tokens: compacted by the chart`,
      status,
      audit: await orchestrator.audit(status.taskId),
      steps: [],
      bookings: service.bookings,
      refunds: [],
      reserveRequests: service.reserveRequests.length,
      transcript: await orchestrator.transcript(status.taskId),
    };
    return result;
  } finally {
    await orchestrator.close();
  }
}
