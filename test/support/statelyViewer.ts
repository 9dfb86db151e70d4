/**
 * A viewer of the Stately relay as its page is: it loads the page (with the headers of a signed-in browser, or the
 * access key in the URL), reads the page's one-time token and opens the WebSocket with the relay's Origin. Options
 * let a test pose as what the relay must refuse (another Origin, no token).
 */
import { once } from 'node:events';
import WebSocket from 'ws';

export interface ViewerOptions {
  /** Headers of the page request (a session cookie, a bearer token). */
  headers?: Record<string, string>;
  /** The Origin the WebSocket sends (default: the page's own). */
  origin?: string | null;
  /** Use this token instead of the page's ('' sends none). */
  token?: string;
}

export interface Viewer {
  frames: { type: string; sessionId: string; [field: string]: unknown }[];
  socket: WebSocket;
  closed: Promise<unknown>;
}

/** The token the page was issued (what its script connects with). */
export async function pageToken(pageUrl: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(pageUrl, { headers });
  if (response.status !== 200) throw new Error(`page answered ${response.status}`);
  const match = /encodeURIComponent\("([^"]+)"\)/.exec(await response.text());
  if (!match) throw new Error('no token in the page');
  return match[1]!;
}

/** Opens a viewer; rejects with the HTTP status when the relay refuses the upgrade. */
export async function openViewer(pageUrl: string, options: ViewerOptions = {}): Promise<Viewer> {
  const page = new URL(pageUrl);
  const token = options.token ?? (await pageToken(pageUrl, options.headers));
  const origin = options.origin === undefined ? page.origin : options.origin;
  const socket = new WebSocket(`ws://${page.host}/${token ? `?token=${encodeURIComponent(token)}` : ''}`, {
    ...(origin === null ? {} : { origin }),
  });
  const frames: Viewer['frames'] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data)) as Viewer['frames'][number]));
  const closed = once(socket, 'close').catch(() => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_request, response) => {
      reject(Object.assign(new Error(`refused: ${response.statusCode}`), { status: response.statusCode }));
    });
    socket.once('error', reject);
  });
  return { frames, socket, closed };
}
