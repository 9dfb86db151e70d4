/** The chart's answers to host events that the current state does not take: nothing changes, the sender is told why. */
import type { Step } from './step.js';

export const replyNotWaitingForConfirmation: Step = () => ({
  reply: {
    accepted: false,
    code: 'not_waiting_for_confirmation',
    message: 'the task is not waiting for a confirmation',
  },
});

export const replyNotWaitingForAnswer: Step = () => ({
  reply: {
    accepted: false,
    code: 'not_waiting_for_answer',
    message: 'the task is not waiting for this user to answer',
  },
});

export const replyNothingDue: Step = () => ({
  reply: { accepted: false, code: 'nothing_due', message: 'nothing of this task is due now' },
});

export const replyNotWaitingForModel: Step = () => ({
  reply: { accepted: false, code: 'not_waiting_for_model', message: 'the task is not waiting for the model' },
});
