/**
 * Tools per step: the host's offer rule decides which of the principal's tools the model is offered in each turn,
 * from where the task is (turn, tools that returned a trusted result, mandate kind). A call to a tool not offered is
 * refused (`not_offered`) before its arguments are looked at; the offer is in the turn's audit; a rule that throws
 * offers nothing; a stop's undo is the host's call and is not limited by it.
 */
import { describe, expect, it } from 'vitest';
import type { AgentModel, ModelRequest } from '../src/model/agentModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { type ScriptView, reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { BookingService } from '../examples/booking/bookingService.js';
import { CateringDesk } from '../examples/booking/cateringService.js';
import { sagaTools } from '../examples/booking/sagaScenario.js';
import type { OfferFacts } from '../machines/toolkit.js';
import { BOOKING_TERMS, E17, MEETING } from '../examples/booking/scenarios.js';
import { bookingMandate } from '../tools/mandates.js';
import { byKind, reserveArgs } from './support/harness.js';

/** Records the tools the model was offered in each turn. */
function recording(model: AgentModel): AgentModel & { offered: string[][] } {
  const offered: string[][] = [];
  return Object.assign(
    {
      name: model.name,
      decide: (request: ModelRequest) => {
        offered.push(request.tools.map((t) => t.name));
        return model.decide(request);
      },
    },
    { offered },
  );
}

/** The model orders catering for the room it booked. */
const orderCateringForBooking = (view: ScriptView) =>
  reply.call('order_catering', {
    booking_id: view.data<{ booking_id: string }>('reserve_room')!.booking_id,
    people: 3,
  });

/** Search first; book once a search succeeded; order catering once a booking did. */
const stepwise = (facts: Readonly<OfferFacts>) =>
  facts.succeeded.includes('reserve_room')
    ? ['order_catering']
    : facts.succeeded.includes('find_available_rooms')
      ? ['reserve_room']
      : ['find_available_rooms'];

function setup(offer: (facts: Readonly<OfferFacts>) => readonly string[], script: Parameters<typeof scriptedModel>[0]) {
  const bookings = new BookingService();
  const kitchen = new CateringDesk();
  const model = recording(scriptedModel(script));
  const orchestrator = createOrchestrator({
    tools: sagaTools(bookings, kitchen),
    mandates: [bookingMandate],
    model,
    store: new MemoryStore(),
    offer,
  });
  return { bookings, kitchen, model, orchestrator };
}

const run = (o: ReturnType<typeof setup>['orchestrator'], taskId: string) =>
  o.run({ principal: E17, goal: 'Book a room and order catering', mandate: bookingMandate.of(BOOKING_TERMS), taskId });

describe('tools per step', () => {
  it('offers each turn only the step’s tools, refuses a call to another as not_offered, and audits the offer', async () => {
    const s = setup(stepwise, [
      // Turn 1: the model jumps ahead to booking; only the search is offered.
      reply.call('reserve_room', reserveArgs()),
      reply.call('find_available_rooms', { ...MEETING }),
      reply.call('reserve_room', reserveArgs()),
      orderCateringForBooking,
      reply.answer('Booked and catered.'),
    ]);
    const status = await run(s.orchestrator, 'steps');
    expect(s.model.offered).toEqual([
      ['find_available_rooms'],
      ['find_available_rooms'],
      ['reserve_room'],
      ['order_catering'],
      ['order_catering'],
    ]);
    expect(s.bookings.reserveRequests).toHaveLength(1);
    expect(s.kitchen.orders).toHaveLength(1);
    const audit = await s.orchestrator.audit('steps');
    const refused = byKind(audit, 'gate').find((g) => g.code === 'not_offered');
    expect(refused).toMatchObject({ gate: 'protocol', decision: 'reject', tool: 'reserve_room' });
    expect(refused?.summary).toBe('reserve_room is not offered in this step (offered: find_available_rooms)');
    expect(byKind(audit, 'model_requested').map((e) => e.offered)).toEqual(s.model.offered);
    expect(status.state).toBe('answered');
  });

  it('offers nothing when the rule throws: every call is refused, none runs', async () => {
    const s = setup(() => {
      throw new Error('offer rule broke');
    }, [reply.call('find_available_rooms', { ...MEETING }), reply.answer('I could not search.')]);
    const status = await run(s.orchestrator, 'broken');
    expect(s.model.offered[0]).toEqual([]);
    expect(s.bookings.searches).toBe(0);
    expect(status.observations).toEqual([expect.objectContaining({ ok: false, code: 'not_offered' })]);
  });

  it('does not limit the undo of a stop: the booking is cancelled though cancel_booking is never offered', async () => {
    const s = setup(stepwise, [
      reply.call('find_available_rooms', { ...MEETING }),
      reply.call('reserve_room', reserveArgs()),
      orderCateringForBooking,
      reply.answer('The kitchen refused.'),
    ]);
    s.kitchen.closed = 'closed';
    const status = await s.orchestrator.run({
      principal: E17,
      goal: 'Book a room and order catering',
      mandate: bookingMandate.of(BOOKING_TERMS),
      success: { tool: 'order_catering', require: ['order_id'] },
      taskId: 'undo',
    });
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations?.map((c) => c.result)).toEqual(['compensated']);
    expect(s.model.offered.flat()).not.toContain('cancel_booking');
  });

  it('refuses an offer rule that is not a function', () => {
    expect(() =>
      createOrchestrator({
        tools: [],
        model: scriptedModel([]),
        offer: ['find_available_rooms'] as never,
      }),
    ).toThrow(/options.offer must be a function/);
  });
});
