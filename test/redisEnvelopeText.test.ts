/**
 * The edits a save sends instead of the whole envelope (redisEnvelopeText.ts): spliced into the old text on UTF-8
 * bytes, as lua/save.lua does, they must make exactly the new text, whatever changed (multi-byte characters and
 * surrogate pairs included); and the summary's place in the text must be found.
 */
import { describe, expect, it } from 'vitest';
import { SavedTexts, envelopeEdits, envelopeText, summarySpan } from '../src/store/redis/redisEnvelopeText.js';
import { createRequest, nextRequest } from './support/envelopes.js';

/** What the save script does with the edits: on UTF-8 bytes. */
function splice(old: string, edits: string): string {
  const stored = Buffer.from(old, 'utf8');
  const text = Buffer.from(edits, 'utf8');
  const out: Buffer[] = [];
  let from = 0;
  let at = 0;
  while (at < text.length) {
    const colon = text.indexOf(0x3a, at);
    const head = text.subarray(at, colon).toString();
    expect(head).toMatch(/^\d+,\d+,\d+$/);
    const [offset, removed, added] = head.split(',').map(Number) as [number, number, number];
    expect(offset).toBeGreaterThanOrEqual(from);
    expect(offset + removed).toBeLessThanOrEqual(stored.length);
    out.push(stored.subarray(from, offset), text.subarray(colon + 1, colon + 1 + added));
    from = offset + removed;
    at = colon + 1 + added;
  }
  out.push(stored.subarray(from));
  return Buffer.concat(out).toString('utf8');
}

const textOf = (value: object) => envelopeText({ taskId: 't', summary: {}, ...value });

function expectEdits(before: object, after: object): string | null {
  const a = textOf(before);
  const b = textOf(after);
  const edits = envelopeEdits(a, b);
  if (edits !== null) expect(splice(a.text, edits)).toBe(b.text);
  return edits;
}

/** A small deterministic random source. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

const PIECES = ['a', 'é', '😀', '😁', '"', '\\', '\n', ',"x":', '{', '}', '1', 'ß', '\u2028', '中'];

describe('envelopeText', () => {
  it('is the JSON, with the summary found in it (bytes, after multi-byte characters too)', () => {
    let request = createRequest('tâche-😀', { state: 'running' });
    for (let i = 0; i < 4; i++) {
      const text = envelopeText(request.envelope);
      expect(text.text).toBe(JSON.stringify(request.envelope));
      expect(text.bytes).toBe(Buffer.byteLength(text.text));
      const bytes = Buffer.from(text.text, 'utf8');
      expect(bytes.subarray(text.summaryAt, text.summaryAt + text.summaryBytes).toString()).toBe(
        JSON.stringify(request.envelope.summary),
      );
      request = nextRequest(request.envelope, { state: i % 2 ? 'running' : 'waiting_for_user' });
    }
  });
  it('finds the top-level summary past members that hold a summary of their own or its text in strings', () => {
    const tricky = [
      { a: '"summary":{"x":1}', summary: { state: 'running' } },
      { b: { summary: { state: 'no' } }, c: ['"summary":', { summary: 1 }], summary: { state: 'é😀' } },
      { d: 'ends with a backslash \\', e: '\\"summary":{}', summary: { s: '}{"][' }, after: { summary: 2 } },
      { n: 1.5e300, t: true, z: null, summary: {} },
    ];
    for (const value of tricky) {
      const text = envelopeText({ taskId: 't', ...value });
      const bytes = Buffer.from(text.text, 'utf8');
      expect(bytes.subarray(text.summaryAt, text.summaryAt + text.summaryBytes).toString()).toBe(
        JSON.stringify(value.summary),
      );
    }
    expect(summarySpan('{"summary":1}')).toBeNull();
    expect(summarySpan('{"a":{"summary":{}}}')).toBeNull();
    expect(summarySpan('[{"summary":{}}]')).toBeNull();
    expect(summarySpan('{"a":"x')).toBeNull();
    expect(() => envelopeText({ taskId: 't', summary: { toJSON: () => 'flat' } })).toThrow(/no summary object/);
  });
});

describe('envelopeEdits', () => {
  it('splices a run of saves of a task into each next one, far shorter than the text', () => {
    let request = createRequest('t1', { state: 'running' });
    let before = envelopeText(request.envelope);
    for (let i = 0; i < 8; i++) {
      request = nextRequest(request.envelope, { state: i === 3 ? 'waiting_for_user' : 'running' });
      const context = request.envelope.snapshot.context as { goal: string; evidence: unknown[] };
      context.goal = `réservez 🎉 une salle ${'é'.repeat(i)}`;
      if (i % 2) context.evidence = [{ note: `ß${i}` }];
      const after = envelopeText(request.envelope);
      const edits = envelopeEdits(before, after);
      expect(edits).not.toBeNull();
      expect(splice(before.text, edits!)).toBe(after.text);
      expect(Buffer.byteLength(edits!)).toBeLessThan(after.bytes / 2);
      before = after;
    }
  });

  it('splices members that come and go, surrogate pairs that share a half, and gives up when all changed', () => {
    const long = 'a'.repeat(200);
    expect(
      expectEdits({ x: 1, y: { p: long, q: 2 }, z: long }, { x: 1, y: { p: long, q: 2, r: 'n' }, z: long }),
    ).not.toBeNull();
    expect(expectEdits({ x: 1, y: { p: long, q: 2 }, z: long }, { x: 1, z: long })).not.toBeNull();
    expect(expectEdits({ e: `${long}😀${long}` }, { e: `${long}😁${long}` })).not.toBeNull();
    expect(expectEdits({ e: `${long}😀é${long}` }, { e: `${long}😀è${long}` })).not.toBeNull();
    expect(expectEdits({ e: `${long}x😀${long}` }, { e: `${long}y😀${long}` })).not.toBeNull();
    expect(envelopeEdits(textOf({ a: 'x'.repeat(1000) }), textOf({ a: 'y'.repeat(1000) }))).toBeNull();
    expect(envelopeEdits(textOf({ a: 1 }), textOf({ a: 1 }))).toBe('');
  });

  it('splices random changes of random texts exactly (500 cases)', () => {
    const next = random(7);
    const word = () => {
      let text = '';
      const length = Math.floor(next() * 12);
      for (let i = 0; i < length; i++) text += PIECES[Math.floor(next() * PIECES.length)];
      return text;
    };
    for (let n = 0; n < 500; n++) {
      const before: Record<string, unknown> = {};
      const members = 5 + Math.floor(next() * 40);
      for (let i = 0; i < members; i++) before[`k${i}${word()}`] = next() < 0.5 ? word() : { v: word(), w: [word()] };
      const after: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(before)) {
        const roll = next();
        if (roll < 0.1) continue;
        if (roll < 0.3) after[key] = word();
        else after[key] = value;
        if (roll > 0.95) after[`new${word()}`] = word();
      }
      expectEdits(before, after);
    }
  });
});

describe('SavedTexts', () => {
  it('gives the text of a revision this store saved, forgets the least recently saved past its limit', () => {
    const texts = new SavedTexts(2);
    const text = textOf({});
    texts.remember('a', 1, text, 'running');
    texts.remember('b', 1, text, 'running');
    texts.remember('a', 2, text, 'waiting_for_user');
    expect(texts.at('a', 1)).toBeNull();
    expect(texts.at('a', 2)).toBe(text);
    texts.remember('c', 1, text, 'running');
    expect(texts.at('b', 1)).toBeNull();
    expect(texts.at('a', 2)).toBe(text);
    expect(texts.state('a')).toBe('waiting_for_user');
    texts.forget('a');
    expect(texts.at('a', 2)).toBeNull();
    expect(texts.state('a')).toBe('waiting_for_user');
  });

  it('keeps at most its bytes of text, a larger text not at all', () => {
    const small = textOf({ goal: 'x'.repeat(100) });
    const large = textOf({ goal: 'x'.repeat(400) });
    const texts = new SavedTexts(10, 2 * small.bytes + 10);
    texts.remember('a', 1, small, 'running');
    texts.remember('b', 1, small, 'running');
    texts.remember('c', 1, large, 'running');
    expect([texts.at('a', 1), texts.at('b', 1), texts.at('c', 1)]).toEqual([small, small, null]);
    expect(texts.state('c')).toBe('running');
    texts.remember('a', 2, small, 'running');
    texts.remember('d', 1, small, 'running');
    expect([texts.at('a', 2), texts.at('b', 1), texts.at('d', 1)]).toEqual([small, null, small]);
    texts.forget('a');
    texts.remember('e', 1, small, 'running');
    expect([texts.at('d', 1), texts.at('e', 1)]).toEqual([small, small]);
  });
});
