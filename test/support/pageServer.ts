/**
 * A Fastify service of the task pages for browser tests: the agent service over `orchestrator`, the booking demo's
 * cookie login at `/login?user=E17`, starts refused (the test starts its tasks itself), and headless Chromium.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { demoAuthenticate } from '../../examples/booking/service.js';
import { agentService } from '../../src/http/index.js';
import type { Orchestrator } from '../../src/index.js';
import { launchBrowser } from './browser.js';

export interface PageServer {
  app: FastifyInstance;
  origin: string;
  browser: Browser;
}

/** Serves the pages on a free port and launches Chromium at `executablePath`. */
export async function servePages(orchestrator: Orchestrator, executablePath: string): Promise<PageServer> {
  const app = Fastify({ logger: false });
  app.get('/login', async (request, response) => {
    const { user } = request.query as { user: string };
    return response.header('set-cookie', `demo_user=${user}; Path=/; HttpOnly; SameSite=Strict`).send('ok');
  });
  await app.register(agentService, {
    orchestrator,
    authenticate: demoAuthenticate,
    startRequest: () => {
      throw new Error('tasks are started by the test');
    },
    rateLimit: false,
  });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, origin, browser: await launchBrowser(executablePath) };
}

/** Closes what `servePages` opened, whichever parts of it exist. */
export async function closePages(server: Partial<PageServer> | undefined): Promise<void> {
  await server?.browser?.close();
  await server?.app?.close();
}
