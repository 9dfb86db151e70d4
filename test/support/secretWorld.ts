/**
 * A task that meets credentials where they enter, with no privacy configuration at all: the goal names an AWS key
 * id; a read's result carries a key in free text (`api_key=sk-live-…`), a password in a JSON field and a bearer
 * token in a header; the model writes a GitHub token in its text, a password in a call's arguments and a token in
 * its answer. What the model is shown (its goal, observations and transcript, every turn), every stream and the
 * task's event stream over HTTP (SSE) are collected, to look for the credentials in them.
 */
import Fastify from 'fastify';
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import { agentService } from '../../src/http/index.js';
import type { AgentModel } from '../../src/model/agentModel.js';
import { reply, scriptedModel } from '../../src/testing/scriptedModel.js';
import type { TaskStore } from '../../src/store/taskStore.js';
import { type Tool, defineTool } from '../../src/tool.js';
import { type HarnessOptions, harness } from './harness.js';
import { collectStreams } from './walletWorld.js';

/** In the goal. */
export const GOAL_KEY_ID = 'AKIAQ3EGUQ7X5DEMO4KZ';
/** In the read's summary, as `api_key=…`. */
export const TOOL_KEY = 'sk-live-4eC39HqLyjWDarjtT1zdp7dc';
/** In the read's `db.password` field (with spaces: no shape would find it, only its key). */
export const DB_PASSWORD = 'correct horse battery staple';
/** In the read's `headers.Authorization`. */
export const SESSION_TOKEN = 'vF9dft4qmTc2Nvb3RlckBhdHRhY2tlci5jb20';
/** In the model's text beside its call. */
export const MODEL_GITHUB_TOKEN = 'ghp_R2d2C3poB8b8Ig88Kx7Lm4Np6Qr8St0Uv2Wx';
/** In the model's call arguments, as `"password": …`. */
export const MODEL_PASSWORD = 'hunter2 forever';
/** In the model's answer, as `token: …`. */
export const MODEL_TOKEN = 'tk_9Fq2LmXz7Hc4Vb8Np3Rs';

export const CREDENTIALS = [
  GOAL_KEY_ID,
  TOOL_KEY,
  DB_PASSWORD,
  SESSION_TOKEN,
  MODEL_GITHUB_TOKEN,
  MODEL_PASSWORD,
  MODEL_TOKEN,
];

/** Which credentials occur in `text`. */
export function credentialsIn(text: string): string[] {
  return CREDENTIALS.filter((secret) => text.includes(secret));
}

export const OPERATOR: Principal = {
  userId: 'ops-1',
  tenantId: 'acme',
  scopes: ['config:read'],
  sessionId: 'sess-ops',
};

/** What the login check received: a tool that declares no sensitive argument gets the token, never the value. */
export interface LoginCalls {
  received: { account: string; password: string }[];
}

export function secretTools(calls: LoginCalls): Tool[] {
  return [
    defineTool({
      name: 'read_config',
      description: 'Reads a service configuration.',
      effect: 'read',
      scopes: ['config:read'],
      timeoutMs: 500,
      input: z.strictObject({ service: z.string() }),
      output: z.strictObject({
        summary: z.string(),
        db: z.strictObject({ host: z.string(), password: z.string() }),
        headers: z.record(z.string(), z.string()),
        max_tokens: z.number(),
      }),
      execute: async () => ({
        ok: true,
        value: {
          summary: `billing connected with api_key=${TOOL_KEY} (rotated yearly)`,
          db: { host: 'db.internal', password: DB_PASSWORD },
          headers: { Authorization: `Bearer ${SESSION_TOKEN}`, Accept: 'application/json' },
          max_tokens: 4096,
        },
      }),
    }),
    defineTool({
      name: 'check_login',
      description: 'Checks a login.',
      effect: 'read',
      scopes: ['config:read'],
      timeoutMs: 500,
      input: z.strictObject({ account: z.string(), password: z.string() }),
      output: z.strictObject({ ok: z.boolean() }),
      execute: async (args) => {
        calls.received.push(args);
        return { ok: true, value: { ok: false } };
      },
    }),
  ];
}

/** A scripted model that keeps, each turn, everything it was shown (the goal, the observations, the transcript). */
function recordingModel(inner: AgentModel, seen: string[]): AgentModel {
  return {
    name: inner.name,
    reservation: inner.reservation,
    async decide(request) {
      seen.push(
        JSON.stringify({
          goal: request.goal,
          observations: request.observations,
          transcript: await request.transcript(),
        }),
      );
      return inner.decide(request);
    },
  };
}

export function secretScript() {
  return [
    reply.call('read_config', { service: 'billing' }),
    {
      type: 'tool_calls' as const,
      text: `Trying the deploy token ${MODEL_GITHUB_TOKEN} first.`,
      calls: [{ name: 'check_login', arguments: JSON.stringify({ account: 'ada', password: MODEL_PASSWORD }) }],
    },
    reply.answer(`The login failed. For the record, token: ${MODEL_TOKEN}`),
  ];
}

/** Runs the task to its end; returns what the model saw, the streams, the SSE body and what the login check got. */
export async function runSecretTask(options: {
  store: TaskStore;
  taskId: string;
  privacy?: HarnessOptions['privacy'];
}) {
  const calls: LoginCalls = { received: [] };
  const seen: string[] = [];
  const streams = collectStreams();
  const h = harness({
    store: options.store,
    model: recordingModel(scriptedModel(secretScript()), seen),
    extraTools: secretTools(calls),
    privacy: options.privacy,
    inspect: streams.inspect,
    logger: streams.logger,
    hooks: streams.hooks,
  });
  const status = await h.orchestrator.run({
    principal: OPERATOR,
    goal: `Check the billing login (key id ${GOAL_KEY_ID}).`,
    taskId: options.taskId,
  });
  streams.push(status, await h.orchestrator.audit(options.taskId), await h.orchestrator.transcript(options.taskId));
  // The task's events as a browser receives them (the task has ended: the stream sends everything, then `end`).
  const app = Fastify();
  // This test only reads the task's stream: its service starts no task, so its start request takes the goal alone.
  const startRequest = (body: { goal: string }) => ({ goal: body.goal });
  await app.register(agentService, {
    orchestrator: h.orchestrator,
    authenticate: () => OPERATOR,
    startRequest,
    pages: false,
  });
  const sse = await app.inject({ method: 'GET', url: `/api/tasks/${options.taskId}/events` });
  await app.close();
  await h.orchestrator.close();
  return { status, seen, streams, sse: sse.body, calls };
}
