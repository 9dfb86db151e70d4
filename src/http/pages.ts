/**
 * The service's own pages: the approval inbox (`/inbox`), the operator console (`/console`) and the live task page
 * (`/tasks/:taskId`, with its history and operator panel), plain HTML, CSS and browser JavaScript from
 * `src/http/pages/`, served by the plugin itself (no bundler, no third-party script, nothing loaded from elsewhere:
 * they work offline). The Content-Security-Policy allows only this origin's scripts,
 * styles and connections, and no framing.
 */
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { serviceError } from './serviceError.js';

const PAGES = new URL('./pages/', import.meta.url);

const ASSETS: Record<string, string> = {
  'common.js': 'text/javascript; charset=utf-8',
  'inbox.js': 'text/javascript; charset=utf-8',
  'task.js': 'text/javascript; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'operator.js': 'text/javascript; charset=utf-8',
  'chart.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
};

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cache-control', 'no-store');
}

export function registerPages(app: FastifyInstance, base: string): void {
  const html = async (name: string) =>
    (await readFile(new URL(name, PAGES), 'utf8')).replaceAll('{{base}}', escapeAttribute(base));
  app.get('/inbox', async (_request, reply) =>
    secure(reply)
      .type('text/html; charset=utf-8')
      .send(await html('inbox.html')),
  );
  app.get('/console', async (_request, reply) =>
    secure(reply)
      .type('text/html; charset=utf-8')
      .send(await html('console.html')),
  );
  app.get('/tasks/:taskId', async (_request, reply) =>
    secure(reply)
      .type('text/html; charset=utf-8')
      .send(await html('task.html')),
  );
  app.get('/assets/:file', async (request, reply) => {
    const { file } = request.params as { file: string };
    const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
    if (!type) throw serviceError(404, 'not_found', `no asset ${file}`);
    return secure(reply)
      .type(type)
      .send(await readFile(new URL(file, PAGES), 'utf8'));
  });
}

function escapeAttribute(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
