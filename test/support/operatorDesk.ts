/**
 * The operator's desk as the service tests and the console's browser test meet it: the demo's people and sign-in
 * (`demoAuthenticate`: a bearer token or the `demo_user` cookie) over an orchestrator whose booking service loses its
 * reserve responses and cannot be looked up, so a booking is held for review; a refund waits for E17's
 * confirmation. Each task gets its own scripted model, chosen by its goal.
 */
import Fastify from 'fastify';
import { BookingService } from '../../examples/booking/bookingService.js';
import { refundScript } from '../../examples/booking/refundScenario.js';
import { DEMO_USERS, demoAuthenticate, demoStartRequest } from '../../examples/booking/service.js';
import { agentService } from '../../src/http/index.js';
import type { AgentModel, Principal, TaskStore } from '../../src/index.js';
import { TransientModelError } from '../../src/model/agentModel.js';
import { reply, scriptedModel } from '../../src/testing/index.js';
import { BOOKING_TERMS, REFUND_TERMS } from '../../examples/booking/requests.js';
import { bookingMandate, refundMandate } from '../../tools/mandates.js';
import { BOOKING_GOAL, BOOKING_SUCCESS, REFUND_GOAL, REFUND_SUCCESS, harness, reserveArgs } from './harness.js';

/** Globex's operator, beside the demo's people: an operator of another tenant. */
export const GLOBEX_OPERATOR: Principal = {
  userId: 'G1',
  tenantId: 'globex',
  scopes: ['tasks:operate', 'tasks:review'],
};

/** The goal of a task whose model is down while `desk.modelDown` is true. */
export const OUTAGE_GOAL = 'Say hello (the model is down)';

export async function operatorDesk(options: { store?: TaskStore } = {}) {
  const state = { modelDown: true };
  const bookings = new BookingService();
  bookings.findByIdempotencyKey = async () => {
    throw new Error('booking index unavailable');
  };
  const models = new Map<string, AgentModel>();
  const model: AgentModel = {
    name: 'scripted-desk',
    decide(request) {
      if (request.goal === OUTAGE_GOAL) {
        if (state.modelDown) return Promise.reject(new TransientModelError('503 service unavailable'));
        return Promise.resolve(reply.answer('Hello.'));
      }
      let scripted = models.get(request.taskId);
      if (!scripted) {
        scripted = scriptedModel(
          request.goal === REFUND_GOAL
            ? refundScript()
            : [reply.call('reserve_room', reserveArgs()), reply.answer('Booked B204.')],
        );
        models.set(request.taskId, scripted);
      }
      return scripted.decide(request);
    },
  };
  const { orchestrator } = harness({
    bookings,
    model,
    ...(options.store ? { store: options.store } : {}),
    adminScope: 'tasks:operate',
    refundOptions: { confirmAboveCents: 10_000 },
    expirySweepMs: 0,
    // A model outage is waited out (the outage task), with its wake-up far enough for an operator to act first.
    policy: { modelOutageMs: 3_600_000, modelWakeMs: { first: 600_000, longest: 600_000 } },
  });
  const app = Fastify();
  await app.register(agentService, {
    orchestrator,
    authenticate: (request) =>
      /(?:^Bearer |demo_user=)G1\b/.test(`${request.headers.authorization ?? ''}${request.headers.cookie ?? ''}`)
        ? GLOBEX_OPERATOR
        : demoAuthenticate(request),
    startRequest: demoStartRequest,
    rateLimit: false,
  });
  return {
    app,
    orchestrator,
    /** A refund of E17's (or `user`'s) waiting for its confirmation. */
    async refund(taskId: string, user = 'E17') {
      const status = await orchestrator.run({
        principal: DEMO_USERS[user]!,
        goal: REFUND_GOAL,
        mandate: refundMandate.of(REFUND_TERMS),
        success: REFUND_SUCCESS,
        taskId,
      });
      if (status.state !== 'waiting_for_confirmation') throw new Error(`refund ${taskId} is ${status.state}`);
      return status;
    },
    /** A booking of `user`'s whose reserve response was lost and cannot be looked up: held for review. */
    async heldBooking(taskId: string, user = 'E17') {
      bookings.faults.loseNextReserveResponse = true;
      const status = await orchestrator.run({
        principal: DEMO_USERS[user]!,
        goal: BOOKING_GOAL,
        mandate: bookingMandate.of(BOOKING_TERMS),
        success: BOOKING_SUCCESS,
        taskId,
      });
      if (status.state !== 'review_required') throw new Error(`booking ${taskId} is ${status.state}`);
      return status;
    },
    /** Whether the outage task's model fails (default true). */
    set modelDown(down: boolean) {
      state.modelDown = down;
    },
    /** A task of `user`'s waiting out a model outage (`waiting_for_model`). */
    async outage(taskId: string, user = 'E17') {
      const status = await orchestrator.run({ principal: DEMO_USERS[user]!, goal: OUTAGE_GOAL, taskId });
      if (status.state !== 'waiting_for_model') throw new Error(`outage ${taskId} is ${status.state}`);
      return status;
    },
    async close() {
      await app.close();
      await orchestrator.close();
    },
  };
}

export type OperatorDesk = Awaited<ReturnType<typeof operatorDesk>>;
