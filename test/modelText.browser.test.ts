/**
 * The live task page shows a streaming model's text while it is written, as a transient "model is writing…" line,
 * and drops it once the turn's journal entry arrives. A local server replays the recorded gpt-4.1-nano text stream
 * (its content replaced by three lines, sent slowly) to the demo service's Chat Completions adapter with
 * `stream: true`, in Debian's chromium.
 *
 * The tool calls the model writes show under it, labelled "proposed, not yet checked", and go with it.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { readFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { type FakeOpenAI, type FakeReply, startFakeOpenAI } from './support/fakeOpenAI.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/modelText.browser.test.ts skipped: ${missing}`);

/** The recorded text stream with its content deltas replaced by `pieces` (see modelTextLive.test.ts). */
function textStream(pieces: string[], gapMs: number): FakeReply {
  const recorded = readFileSync(
    new URL('./fixtures/wire/streams/openai-chat-gpt-4.1-nano-text.jsonl', import.meta.url),
    'utf8',
  )
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { choices: { delta: Record<string, unknown> }[] });
  const [first, second, ...rest] = recorded;
  const content = pieces.map((piece) => ({
    ...second,
    choices: [{ ...second!.choices[0], delta: { ...second!.choices[0]!.delta, content: piece } }],
  }));
  return { kind: 'sse', events: [first, ...content, ...rest.slice(-2)], done: true, gapMs };
}

let fakeModel: FakeOpenAI;
let service: DemoService;
let origin: string;
let browser: Browser;
let pageReady!: () => void;
const ready = new Promise<void>((resolve) => (pageReady = resolve));

describe.runIf(available)('the live task page with a streaming model', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    fakeModel = await startFakeOpenAI([
      async () => {
        await ready;
        return textStream(['Checking the order.', '\nThe refund ', 'is not needed.', '\nDone', '.'], scaled(400));
      },
    ]);
    const model = createOpenAIModel({
      baseURL: fakeModel.url,
      apiKey: 'sk-test-0123456789abcdefghij',
      model: 'gpt-4.1-nano',
      env: {},
      stream: true,
    });
    service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, model });
    origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await fakeModel?.close();
  });

  it(
    'shows "model is writing…" with the text so far, then drops it for the turn’s record',
    async () => {
      const context = await browser.newContext();
      context.setDefaultTimeout(scaled(30_000));
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${origin}/login?user=E17`);
      const started = await fetch(`${origin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
        body: JSON.stringify(REFUND_START_BODY),
      });
      expect(started.ok).toBe(true);
      const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
      await page.goto(`${origin}/tasks/${taskId}`);
      await page.getByTestId('live').filter({ hasText: 'live: following the task events' }).waitFor();
      pageReady();

      const writing = page.getByTestId('writing');
      await writing.filter({ hasText: 'model is writing… Checking the order.' }).waitFor();
      await writing.filter({ hasText: 'The refund is not needed.' }).waitFor();
      expect(await writing.isVisible()).toBe(true);
      // The turn's record arrives; the transient line goes.
      await page.locator('body[data-ended=true]').waitFor();
      expect(await writing.isHidden()).toBe(true);
      expect(fakeModel.requests[0]!.body.stream).toBe(true);
      expect(errors).toEqual([]);
      await context.close();
    },
    scaled(60_000),
  );
});

/** The recorded tool-call stream with its call named `name` and its argument fragments replaced by `fragments`. */
function callStream(name: string, fragments: string[], gapMs: number): FakeReply {
  const recorded = readFileSync(
    new URL('./fixtures/wire/streams/openai-chat-gpt-4.1-nano-tool-call.jsonl', import.meta.url),
    'utf8',
  )
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { choices: { delta: { tool_calls?: any[] | null } }[] });
  const opening = recorded.findIndex((c) => c.choices[0]?.delta?.tool_calls?.[0]?.id);
  const open = structuredClone(recorded[opening]!);
  open.choices[0]!.delta.tool_calls![0].function.name = name;
  const pieces = fragments.map((args) => {
    const chunk = structuredClone(recorded[opening + 1]!);
    chunk.choices[0]!.delta.tool_calls![0].function.arguments = args;
    return chunk;
  });
  return {
    kind: 'sse',
    events: [...recorded.slice(0, opening), open, ...pieces, ...recorded.slice(-2)],
    done: true,
    gapMs,
  };
}

describe.runIf(available)('the live task page with a streaming model that calls a tool', () => {
  let callModel: FakeOpenAI;
  let callService: DemoService;
  let callOrigin: string;
  let callBrowser: Browser;
  let watching!: () => void;
  const watched = new Promise<void>((resolve) => (watching = resolve));
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    callModel = await startFakeOpenAI([
      async () => {
        await watched;
        return callStream('get_order', ['{"order_id":', ' "O-1001",', ' "x": "y"}'], scaled(400));
      },
      textStream(['Looked it up.'], 0),
    ]);
    const model = createOpenAIModel({
      baseURL: callModel.url,
      apiKey: 'sk-test-0123456789abcdefghij',
      model: 'gpt-4.1-nano',
      env: {},
      stream: true,
    });
    callService = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, model });
    callOrigin = await callService.app.listen({ port: 0, host: '127.0.0.1' });
    callBrowser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await callBrowser?.close();
    await callService?.close();
    await callModel?.close();
  });

  it(
    'shows the call being written as "proposed, not yet checked", then drops it',
    async () => {
      const context = await callBrowser.newContext();
      context.setDefaultTimeout(scaled(30_000));
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${callOrigin}/login?user=E17`);
      const started = await fetch(`${callOrigin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
        body: JSON.stringify(REFUND_START_BODY),
      });
      expect(started.ok).toBe(true);
      const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
      await page.goto(`${callOrigin}/tasks/${taskId}`);
      await page.getByTestId('live').filter({ hasText: 'live: following the task events' }).waitFor();
      watching();
      const proposing = page.getByTestId('proposing');
      await proposing.filter({ hasText: 'proposed, not yet checked: get_order {"order_id": "O-1001",' }).waitFor();
      expect(await proposing.isVisible()).toBe(true);
      // The turn's record arrives; the proposal line goes.
      await page.locator('body[data-ended=true]').waitFor();
      expect(await proposing.isHidden()).toBe(true);
      expect(errors).toEqual([]);
      await context.close();
    },
    scaled(60_000),
  );
});
