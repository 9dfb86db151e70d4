/**
 * A small SSE client for tests: collects a task's events (with the time each arrived) until `until` says stop, the
 * server ends the stream, or `close()` is called.
 */
import http from 'node:http';

export interface ReceivedEvent {
  id: string | null;
  event: string;
  data: { seq?: number; status?: string; state?: string | null; kind?: string };
  /** Date.now() when its block arrived. */
  at: number;
}

export interface SseStream {
  events: ReceivedEvent[];
  /** Resolves when the stream ended (by the server, `until`, or `close()`), with the HTTP status. */
  done: Promise<{ status: number }>;
  close(): void;
}

export function openTaskEvents(
  origin: string,
  taskId: string,
  options: { token: string; lastEventId?: string; until?: (events: ReceivedEvent[]) => boolean },
): SseStream {
  const events: ReceivedEvent[] = [];
  let finish!: (value: { status: number }) => void;
  const done = new Promise<{ status: number }>((resolve) => (finish = resolve));
  let status = 0;
  const request: http.ClientRequest = http.get(
    `${origin}/api/tasks/${encodeURIComponent(taskId)}/events`,
    {
      headers: {
        authorization: `Bearer ${options.token}`,
        ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}),
      },
    },
    (response) => {
      status = response.statusCode!;
      let buffer = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const at = Date.now();
        buffer += chunk;
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const fields = Object.fromEntries(
            block
              .split('\n')
              .filter((l) => /^(id|event|data):/.test(l))
              .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
          );
          if (fields.event === undefined) continue;
          events.push({ id: fields.id ?? null, event: fields.event, data: JSON.parse(fields.data ?? '{}'), at });
          if (options.until?.(events)) {
            request.destroy();
            finish({ status });
          }
        }
      });
      response.on('end', () => finish({ status }));
      response.on('error', () => finish({ status }));
    },
  );
  request.on('error', () => finish({ status }));
  return {
    events,
    done,
    close() {
      request.destroy();
      finish({ status });
    },
  };
}
