/**
 * An inspection sink that writes one JSON object per line: to any writable stream, or to a file it opens and
 * closes itself. Lines are written in order; `close()` resolves once they are flushed.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import type { InspectionMessage, InspectionSink } from './inspectionStream.js';

/** Writes messages as JSON lines to `stream`. `close()` ends the stream unless `end: false` (e.g. stdout). */
export function jsonLinesSink(stream: Writable, options: { end?: boolean } = {}): InspectionSink {
  let failed = false;
  stream.on('error', () => {
    failed = true;
  });
  return {
    write(message) {
      if (failed || stream.destroyed || stream.writableEnded) return;
      stream.write(`${JSON.stringify(message)}\n`);
    },
    close() {
      if (options.end === false || stream.writableEnded || stream.destroyed) return Promise.resolve();
      return new Promise<void>((resolve) => {
        stream.once('error', () => resolve());
        stream.end(() => resolve());
      });
    },
  };
}

/** Writes messages as JSON lines to `path` (truncated first; its directory is created). */
export async function jsonLinesFileSink(path: string): Promise<InspectionSink & { path: string }> {
  await mkdir(dirname(path), { recursive: true });
  const stream = createWriteStream(path, { flags: 'w' });
  await new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve());
    stream.once('error', reject);
  });
  return { ...jsonLinesSink(stream), path };
}

/** Parses a JSON-lines file's content (blank lines ignored). */
export function parseJsonLines(text: string): InspectionMessage[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as InspectionMessage);
}
