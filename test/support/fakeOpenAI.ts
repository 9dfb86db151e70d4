/**
 * A scripted OpenAI-compatible server for tests: node:http on 127.0.0.1, port 0. It answers
 * `POST /v1/chat/completions` or `POST /v1/responses` (with or without `/v1`) with the next step of its script and records every
 * request body, so tests drive the real `openai` client and assert on exactly what went over the wire.
 */
import { type IncomingHttpHeaders, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRequest {
  /** 0-based among chat completion and responses requests. */
  index: number;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body, as the client sent it. */
  body: any;
  /** Date.now() when the body was received. */
  receivedAt: number;
  /** True when the client closed the connection before the response was sent. */
  aborted: boolean;
  /** Resolves when the client closes the connection before the response was sent. */
  closed: Promise<void>;
}

export type FakeReply =
  | { kind: 'json'; body: unknown; status?: number; headers?: Record<string, string>; delayMs?: number }
  /** A body sent as it is, under the given content type (a server that answers HTML or broken JSON). */
  | {
      kind: 'text';
      text: string;
      contentType: string;
      status?: number;
      headers?: Record<string, string>;
      delayMs?: number;
    }
  /**
   * A Server-Sent Events stream: each event as one `data:` frame (with `event: <type>` when the event has a `type`,
   * as the Responses API frames them), then `data: [DONE]` when `done` (Chat Completions). `cutAfter` events, the
   * connection is destroyed mid-stream (no terminator); `hangAfter` events, it stays open and silent.
   */
  | {
      kind: 'sse';
      events: unknown[];
      done?: boolean;
      cutAfter?: number;
      hangAfter?: number;
      /** Pause between events, in ms (default 0). */
      gapMs?: number;
      delayMs?: number;
    }
  /** Never answers: the request stays in flight until the client gives up. */
  | { kind: 'hang' };

export type FakeStep = FakeReply | ((request: FakeRequest) => FakeReply | Promise<FakeReply>);

export interface FakeToolCall {
  /** null omits the id. */
  id: string | null;
  name: string;
  /** An object is sent as its JSON text; a string is sent as is (malformed JSON included). */
  args: Record<string, unknown> | string;
  type?: string;
}

let completionNumber = 0;

function completion(
  message: Record<string, unknown>,
  options: { finish?: string; usage?: { prompt_tokens: number; completion_tokens: number } | null } = {},
): unknown {
  const usage = options.usage === undefined ? { prompt_tokens: 120, completion_tokens: 30 } : options.usage;
  return {
    id: `chatcmpl-${++completionNumber}`,
    object: 'chat.completion',
    created: 1_790_000_000,
    model: 'fake',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', refusal: null, ...message },
        finish_reason: options.finish ?? 'stop',
        logprobs: null,
      },
    ],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  };
}

/** Reply builders. */
export const fake = {
  toolCalls(
    calls: FakeToolCall[],
    options: {
      content?: string | null;
      finish?: string;
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
    } = {},
  ): FakeReply {
    const tool_calls = calls.map((call) => ({
      ...(call.id === null ? {} : { id: call.id }),
      type: call.type ?? 'function',
      function: { name: call.name, arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args) },
    }));
    return {
      kind: 'json',
      body: completion(
        { content: options.content ?? null, tool_calls },
        { finish: options.finish ?? 'tool_calls', usage: options.usage },
      ),
    };
  },
  call(id: string, name: string, args: Record<string, unknown> | string): FakeReply {
    return fake.toolCalls([{ id, name, args }]);
  },
  text(
    content: string,
    options: { finish?: string; usage?: { prompt_tokens: number; completion_tokens: number } | null } = {},
  ): FakeReply {
    return { kind: 'json', body: completion({ content }, options) };
  },
  refusal(text: string): FakeReply {
    return { kind: 'json', body: completion({ content: null, refusal: text }) };
  },
  raw(body: unknown): FakeReply {
    return { kind: 'json', body };
  },
  /** A body that is not the JSON it claims to be, or not JSON at all. */
  body(text: string, contentType = 'application/json'): FakeReply {
    return { kind: 'text', text, contentType };
  },
  error(status: number, message: string, headers: Record<string, string> = {}): FakeReply {
    return { kind: 'json', status, headers, body: { error: { message, type: 'fake_error', code: null } } };
  },
  delayed(delayMs: number, reply: FakeReply): FakeReply {
    return reply.kind === 'hang' ? reply : { ...reply, delayMs };
  },
  hang(): FakeReply {
    return { kind: 'hang' };
  },
};

export interface FakeOpenAI {
  /** baseURL for the client, ending in /v1. */
  url: string;
  requests: FakeRequest[];
  /** Appends steps to the script. */
  push(...steps: FakeStep[]): void;
  close(): Promise<void>;
}

/** Starts the server with a script; each chat completion request consumes the next step. */
export async function startFakeOpenAI(script: FakeStep[] = []): Promise<FakeOpenAI> {
  const steps = [...script];
  const requests: FakeRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      if (req.method !== 'POST' || !/^(\/v1)?\/(chat\/completions|responses)$/.test(path)) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: `no route ${req.method} ${path}` } }));
        return;
      }
      let closedResolve!: () => void;
      const record: FakeRequest = {
        index: requests.length,
        path,
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        receivedAt: Date.now(),
        aborted: false,
        closed: new Promise<void>((resolve) => (closedResolve = resolve)),
      };
      requests.push(record);
      res.on('close', () => {
        if (!res.writableFinished) {
          record.aborted = true;
          closedResolve();
        }
      });
      void respond(record);
    });

    async function respond(record: FakeRequest): Promise<void> {
      const step = steps[record.index];
      const reply: FakeReply =
        step === undefined
          ? fake.error(400, `fake server: no scripted response for request #${record.index + 1}`)
          : typeof step === 'function'
            ? await step(record)
            : step;
      if (reply.kind === 'hang') return;
      if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
      if (record.aborted || res.destroyed) return;
      if (reply.kind === 'sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for (const [index, event] of reply.events.entries()) {
          if (index === reply.cutAfter) {
            // What was written reaches the client first: the cut falls mid-stream, not before the headers.
            await new Promise((resolve) => setTimeout(resolve, 30));
            res.destroy();
            return;
          }
          if (index === reply.hangAfter) return;
          const type = (event as { type?: unknown })?.type;
          res.write(`${typeof type === 'string' ? `event: ${type}\n` : ''}data: ${JSON.stringify(event)}\n\n`);
          if (reply.gapMs) await new Promise((resolve) => setTimeout(resolve, reply.gapMs));
          if (record.aborted || res.destroyed) return;
        }
        if (reply.cutAfter !== undefined && reply.cutAfter >= reply.events.length) {
          await new Promise((resolve) => setTimeout(resolve, 30));
          res.destroy();
          return;
        }
        if (reply.hangAfter !== undefined) return;
        res.end(reply.done ? 'data: [DONE]\n\n' : '');
        return;
      }
      if (reply.kind === 'text') {
        res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType, ...reply.headers });
        res.end(reply.text);
        return;
      }
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.body));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    push: (...more) => steps.push(...more),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
