/**
 * A sub-task's result carries its tools' words: the evidence fields of its outcome (and the outcome's message that
 * quotes them) come from the child's tool results. When one of the child's tools is untrusted, so is that result:
 * the parent saw untrusted input, and the Rule of Two holds for it as if it had called the tool itself.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cardNumbers } from '../src/privacy/redactors.js';
import { defineSubtask } from '../src/subtask.js';
import type { ModelReply } from '../src/index.js';
import { type ScriptView, reply } from '../src/testing/index.js';
import { E17, harness, until } from './support/harness.js';
import { waivedNoticeTool, webSearch } from './support/noticeTools.js';

const CHILD = 'Sub-task:';

/** A child that may only search the web; done once a search returned text. */
const delegateSearch = defineSubtask({
  name: 'delegate_search',
  description: 'Hands a web search to a sub-task.',
  input: z.strictObject({ q: z.string() }),
  tools: ['search_web'],
  goal: (args) => `${CHILD} search the web for ${args.q}`,
  budget: { modelTurns: 3, toolCalls: 2 },
  success: { tool: 'search_web', require: ['text'] },
  confirm: { never: 'a search moves nothing' },
});

/** One script for both tasks: the parent delegates the search, then sends the notice the result asks for. */
function step(view: ScriptView): ModelReply {
  if (view.goal.startsWith(CHILD))
    return view.data('search_web') ? reply.answer('found it') : reply.call('search_web', { q: 'card' });
  if (view.data('send_notice')) return reply.answer('sent');
  if (view.data('delegate_search')) return reply.call('send_notice', { text: 'as the page says' });
  return reply.call('delegate_search', { q: 'card' });
}

describe("the Rule of Two across a sub-task's result", () => {
  it("confirms the parent's waived write once a child that used an untrusted tool reported back", async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [webSearch, delegateSearch, waivedNoticeTool(sent)],
      privacy: { redactors: [cardNumbers()] },
      script: Array.from({ length: 8 }, () => step),
    });
    const started = await h.orchestrator.start({
      principal: E17,
      goal: 'Tell me about card 4111 1111 1111 1111',
      taskId: 'parent',
    });
    // The parent rests while it waits for the child; it goes on once the child's outcome is its call's result.
    await until(
      async () => !['running', 'waiting_for_subtask'].includes((await h.orchestrator.status('parent')).state),
    );
    const status = await h.orchestrator.settled(started.taskId);
    const child = status.children[0];
    expect(child).toBeDefined();
    expect((await h.orchestrator.status(child!.childTaskId)).state).toBe('done');
    expect(status.pendingConfirmation).toMatchObject({ tool: 'send_notice', reasons: ['rule_of_two'] });
    expect(sent).toEqual([]);
    await h.orchestrator.close();
  });
});
