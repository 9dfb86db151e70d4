/** The audit entries of one save keep their shared stamp once per Redis stream message, and read back whole. */
import { describe, expect, it } from 'vitest';
import { packAudit } from '../src/store/redis/redisAuditPacking.js';
import { unpackAudit } from '../src/store/redis/redisAuditUnpacking.js';
import { fromTable, toTable } from '../src/store/redis/redisAuditTable.js';
import { packAudit as packAuditBefore } from './support/redisAuditPackingBefore.js';

const stamp = { model: { id: 'm', version: 'v1' }, prompt: 'p1', policy: 'policy-1', session: 's1' };
const entry = (kind: string, extra: Record<string, unknown> = {}) => ({ at: 1, turn: 2, ...stamp, kind, ...extra });

describe('the audit of one save in its stream message', () => {
  it('keeps the stamp once, and reads back exactly the entries saved', () => {
    const entries = [
      entry('model_output'),
      entry('gate', { toolVersion: 'contract:x', tool: 't' }),
      { ...entry('confirmation'), session: 'phone' },
      entry('tool_started'),
    ];
    const text = packAudit(entries);
    expect(text.split('"policy-1"')).toHaveLength(3); // once in the stamp, once in the entry that differs
    expect(text.length).toBeLessThan(JSON.stringify(entries).length);
    expect(unpackAudit(JSON.parse(text))).toEqual(entries);
  });

  it('leaves a single entry, entries without a stamp (before agent/5), and odd values as a plain array', () => {
    for (const entries of [
      [entry('x')],
      [
        { at: 1, turn: 1, kind: 'old' },
        { at: 2, turn: 1, kind: 'old' },
      ],
      [null, 3],
    ]) {
      const text = packAudit(entries);
      expect(JSON.parse(text)).toEqual(entries);
      expect(unpackAudit(JSON.parse(text))).toEqual(entries);
    }
  });

  it('keeps the recorded transitions as one string, out of the key lists, and gives each entry its own back last', () => {
    const entries = [
      entry('model_output', { moves: 'abc1/16' }),
      entry('gate', { moves: '' }),
      entry('gate', { moves: '0k1r' }),
      // Written before transitions were recorded, or with `moves` not last: kept as they are.
      entry('gate'),
      { ...entry('gate', { moves: '0k' }), late: true },
    ];
    const text = packAudit(entries);
    const message = JSON.parse(text) as { moves: string; columns: string[][] };
    expect(message.moves).toBe('abc1/16  0k1r - -');
    expect(message.columns.filter((keys) => keys.includes('moves'))).toEqual([['at', 'turn', 'kind', 'moves', 'late']]);
    const read = unpackAudit(message);
    expect(read).toEqual(entries);
    expect(read!.map((e) => Object.keys(e as object))).toEqual(entries.map((e) => Object.keys(e)));
  });

  it('refuses a message whose transitions do not add up to its entries', () => {
    const message = JSON.parse(packAudit([entry('a', { moves: '0a' }), entry('b', { moves: '0b' })])) as Record<
      string,
      unknown
    >;
    expect(unpackAudit({ ...message, moves: '0a' })).toBeNull();
    expect(unpackAudit({ ...message, moves: '0a 0B' })).toBeNull();
    expect(unpackAudit({ ...message, moves: 3 })).toBeNull();
  });

  it('gives the stamp back only to the entries that shared it (a host entry without one stays as it was)', () => {
    const entries = [entry('a'), { kind: 'test_marker', n: 1 }, entry('b')];
    expect(unpackAudit(JSON.parse(packAudit(entries)))).toEqual(entries);
  });

  it('keeps a call named by several entries once, and gives each entry back its keys in their order', () => {
    const call = { toolVersion: 'contract:abc', callId: 'call_1', tool: 'find', argsHash: `sha256:${'a'.repeat(64)}` };
    const entries = [
      entry('gate', { ...call, gate: 'schema' }),
      {
        at: 3,
        turn: 2,
        ...stamp,
        toolVersion: 'contract:abc',
        kind: 'check_started',
        gate: 'business',
        callId: 'call_1',
        tool: 'find',
        argsHash: call.argsHash,
      },
      // A tool's end has no arguments hash: it still takes its call's other keys.
      {
        at: 4,
        turn: 2,
        ...stamp,
        toolVersion: 'contract:abc',
        kind: 'tool_finished',
        callId: 'call_1',
        tool: 'find',
        code: 'ok',
      },
      // The same id with another hash (never made by the chart) keeps its own values.
      entry('gate', { ...call, argsHash: 'sha256:other' }),
      entry('gate', { callId: 'call_2', tool: 'find', argsHash: 'sha256:lonely' }),
      entry('gate', { callId: null, tool: null, argsHash: null }),
    ];
    const text = packAudit(entries);
    expect(text.split(call.argsHash)).toHaveLength(2);
    expect(text.split('contract:abc')).toHaveLength(3); // in `calls`, and in the entry that differs
    expect(text.length).toBeLessThan(JSON.stringify(entries).length * 0.75);
    const back = unpackAudit(JSON.parse(text))!;
    expect(back.map((e) => JSON.stringify(e))).toEqual(entries.map((e) => JSON.stringify(e)));
  });

  it('keeps times as offsets from the first entry, and any time that is not a safe integer as it was', () => {
    const entries = [
      entry('a', { at: 1_000_000 }),
      entry('b', { at: 999_998 }),
      entry('c', { at: 1.5 }),
      entry('d', { at: 'noon' }),
      { kind: 'no_time' },
    ];
    const text = packAudit(entries);
    expect(text).not.toContain('999998');
    const back = unpackAudit(JSON.parse(text))!;
    expect(back.map((e) => JSON.stringify(e))).toEqual(entries.map((e) => JSON.stringify(e)));
  });

  it('reads back exactly what it packed, for any mix of entries', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const pick = <T>(values: readonly T[]) => values[Math.floor(random() * values.length)]!;
    const values = [null, 0, 1, '', 'x', 'call_1', 'call_2', 'sha256:1', 'contract:1', { a: 1 }, [0], true, 1.5, -3];
    const keys = [
      'at',
      'turn',
      'model',
      'prompt',
      'policy',
      'session',
      'toolVersion',
      'kind',
      'callId',
      'tool',
      'argsHash',
      'extra',
    ];
    for (let round = 0; round < 500; round++) {
      const entries = Array.from({ length: 1 + Math.floor(random() * 8) }, () => {
        if (random() < 0.05) return pick(values);
        const row: Record<string, unknown> =
          random() < 0.7 ? { at: 100 + Math.floor(random() * 10), turn: 1, ...stamp } : {};
        for (const key of keys) if (random() < 0.5) row[key] = pick(values);
        return row;
      });
      const text = packAudit(entries);
      const back = unpackAudit(JSON.parse(text));
      expect(JSON.stringify(back)).toBe(JSON.stringify(entries));
    }
  });

  it('reads back key order and own __proto__ keys as they were, wherever the stamp keys stand', () => {
    const texts = [
      '[{"at":1,"kind":"a","model":1,"prompt":1,"policy":1,"session":1},{"at":2,"kind":"b","model":1,"prompt":1,"policy":1,"session":1}]',
      '[{"prompt":1,"model":1,"policy":1,"session":1},{"prompt":1,"model":1,"policy":1,"session":1}]',
      '[{"turn":1,"at":1,"model":1,"prompt":1,"policy":1,"session":1},{"turn":1,"at":2,"model":1,"prompt":1,"policy":1,"session":1}]',
      '[{"kind":"a","at":1,"model":1,"prompt":1,"policy":1,"session":1},{"kind":"b","at":2,"model":1,"prompt":1,"policy":1,"session":1}]',
      '[{"at":1,"callId":"c"},{"at":2,"callId":"c"},{"at":3,"__proto__":{"x":1}}]',
      '[{"callId":"c","__proto__":{"x":1}},{"callId":"c"}]',
      '[{"model":1,"prompt":1,"policy":1,"session":1,"__proto__":{"x":1}},{"model":1,"prompt":1,"policy":1,"session":1}]',
      '[{"at":-0,"callId":"c"},{"at":5,"callId":"c"}]',
      '[{"at":1e21,"callId":"c"},{"at":9007199254740991,"callId":"c"},{"at":-9007199254740991,"callId":"c"}]',
    ];
    for (const text of texts) {
      const entries = JSON.parse(text) as unknown[];
      expect(JSON.stringify(unpackAudit(JSON.parse(packAudit(entries))))).toBe(JSON.stringify(entries));
    }
  });

  it('reads back entries whose stamp holds an undefined value (left out of the JSON, in the entries as in the stamp)', () => {
    const entries = [entry('a', { session: undefined }), entry('b', { session: undefined })];
    const back = unpackAudit(JSON.parse(packAudit(entries)));
    expect(JSON.stringify(back)).toBe(JSON.stringify(entries));
  });

  it('refuses a packed message whose references do not add up', () => {
    const call = { toolVersion: 'v', callId: 'c', tool: 't', argsHash: 'h' };
    const message = JSON.parse(packAudit([entry('a', call), entry('b', call)]));
    expect(unpackAudit(message)).not.toBeNull();
    expect(unpackAudit({ ...message, called: [[0, 5]] })).toBeNull();
    const rows = fromTable(message.columns, message.table)!;
    expect(unpackAudit({ ...message, ...toTable([{ ...(rows[0] as object), tool: 'forged' }, rows[1]]) })).toBeNull();
    expect(unpackAudit({ ...message, since: 'later' })).toBeNull();
    expect(unpackAudit({ ...message, stamp: undefined })).toBeNull();
    for (const forged of [
      { absolute: 'x' },
      {
        called: [
          [0, 0],
          [7, 0],
        ],
      },
      {
        called: [
          [0.5, 0],
          [1, 0],
        ],
      },
      {
        called: [
          [0, 0],
          [0, 0],
        ],
      },
      { shared: [0, 1, 5] },
      { shared: ['0', 1] },
      { since: 0.5 },
      { calls: [{ ...message.calls[0], kind: 'forged' }] },
      { shared: [] },
      { entries: rows },
      { rows },
      { columns: undefined },
      { table: undefined },
      { columns: [...message.columns, ['x', 'x']] },
      { columns: [['at']] },
      { columns: 'at' },
      { table: [...message.table, [9, 1]] },
      { table: [...message.table, [-1, 1, 2]] },
      { table: [...message.table, { at: 1 }] },
      { table: [[0.5], ...message.table.slice(1)] },
    ]) {
      expect(unpackAudit({ ...message, ...forged })).toBeNull();
    }
  });

  it('reads a message packed before calls and times were (the stamp alone, under `entries`)', () => {
    const {
      model: _m,
      prompt: _p,
      policy: _po,
      session: _s,
      ...bare
    } = entry('gate', { callId: 'c', tool: 't', argsHash: 'h' });
    const legacy = { stamp, shared: [0, 1], entries: [bare, bare] };
    expect(unpackAudit(legacy)).toEqual([
      entry('gate', { callId: 'c', tool: 't', argsHash: 'h' }),
      entry('gate', { callId: 'c', tool: 't', argsHash: 'h' }),
    ]);
    // The packed form keeps its entries under another name, so a version that knows only the stamp refuses it.
    const packed = JSON.parse(
      packAudit(legacy.entries.map(() => entry('gate', { callId: 'c', tool: 't', argsHash: 'h' }))),
    );
    expect(packed.entries).toBeUndefined();
    expect(unpackAudit({ ...packed, entries: fromTable(packed.columns, packed.table) })).toBeNull();
  });

  it('reads a message of the unreleased 0.4.0 builds (packed entries as objects, under `rows`)', () => {
    const call = { toolVersion: 'v', callId: 'c', tool: 't', argsHash: 'h' };
    const entries = [entry('a', call), entry('b', call)];
    const { columns, table, ...message } = JSON.parse(packAudit(entries));
    const legacy = { ...message, rows: fromTable(columns, table) };
    expect(JSON.stringify(unpackAudit(legacy))).toBe(JSON.stringify(entries));
    // The table is under another name, so those builds refuse it instead of misreading it.
    expect(unpackAudit({ ...legacy, columns, table })).toBeNull();
  });

  it('keeps each key list once: the entries of a read round, as the chart writes them', () => {
    const call = { toolVersion: 'contract:abc', callId: 'call_1', tool: 'find', argsHash: `sha256:${'a'.repeat(64)}` };
    const gate = (name: string) => ({
      at: 1,
      turn: 2,
      ...stamp,
      ...call,
      kind: 'gate',
      gate: name,
      decision: 'pass',
      code: null,
      summary: `${name} holds`,
    });
    const entries = ['schema', 'mandate', 'business', 'permission'].map(gate);
    const text = packAudit(entries);
    expect(text.split('"decision"')).toHaveLength(2);
    const { columns, table, ...rest } = JSON.parse(text);
    const asRows = JSON.stringify({ ...rest, rows: fromTable(columns, table) });
    expect(text.length).toBeLessThan(asRows.length * 0.8);
    expect(text.length).toBeLessThan(JSON.stringify(entries).length * 0.55);
    expect(JSON.stringify(unpackAudit(JSON.parse(text)))).toBe(JSON.stringify(entries));
  });

  it('keeps as they are the entries a table would change (undefined values, toJSON, class instances), and odd keys', () => {
    class Event {
      constructor(readonly kind: string) {}
    }
    const dated = { at: 1, turn: 2, ...stamp, kind: 'dated', toJSON: () => ({ kind: 'as JSON' }) };
    const entries = [
      entry('a', { extra: undefined }),
      entry('b', { call: () => 1 }),
      dated,
      new Event('instance'),
      entry('c', { '\u0000': 1, 'a\u0000b': 2 }),
      entry('d', { a: 1, '\u0000b': 2 }),
      entry('e', { 'a\u0000': 1, b: 2 }),
      entry('f', { 2: 'two', 1: 'one', when: new Date(5) }),
      Object.assign(Object.create(null) as object, entry('g')),
      JSON.parse('{"at":1,"turn":2,"__proto__":{"x":1},"kind":"h"}') as unknown,
    ];
    const back = unpackAudit(JSON.parse(packAudit(entries)));
    expect(JSON.stringify(back)).toBe(JSON.stringify(entries));
    expect(Object.getPrototypeOf((back as object[])[9])).toBe(Object.prototype);
  });

  it('reads back entries JSON writes otherwise than their own keys (class instances with times, toJSON, late at and turn)', () => {
    class Timed {
      constructor(
        readonly at: number,
        readonly kind: string,
      ) {}
    }
    const keyed: string[] = [];
    const entries = [
      entry('a', { at: 100 }),
      entry('b', { at: 100 }),
      new Timed(3, 'instance'),
      { at: 4, toJSON: () => ({ at: 4, kind: 'as JSON' }) },
      entry('c', { gone: { toJSON: () => undefined }, named: { toJSON: (key: string) => keyed.push(key) && key } }),
      { at: 5, ...stamp, kind: 'late turn', turn: 9 },
      { ...stamp, kind: 'late at', at: 6 },
      { turn: 1, at: 7, ...stamp, kind: 'turn first' },
      entry('d', { at: undefined }),
      { ...entry('e'), at: (() => 1) as unknown },
    ];
    const expected = JSON.stringify(entries);
    keyed.length = 0;
    const back = unpackAudit(JSON.parse(packAudit(entries)));
    expect(JSON.stringify(back)).toBe(expected);
    expect(keyed).toEqual(['named']);
  });

  it('refuses a stamp that holds keys other than the stamp keys (a forged __proto__ among them)', () => {
    const message = JSON.parse(packAudit([entry('a'), entry('b')]));
    expect(unpackAudit(message)).not.toBeNull();
    expect(unpackAudit({ ...message, stamp: { ...message.stamp, extra: 1 } })).toBeNull();
    const forged = JSON.parse(JSON.stringify(message).replace('"stamp":{', '"stamp":{"__proto__":{"polluted":1},'));
    expect(unpackAudit(forged)).toBeNull();
  });

  it('keeps each key list once however many a message has, and reads them back', () => {
    // Past sixteen key lists the table finds a row's by name (keys joined by NUL, so a name two lists share is checked).
    const entries = Array.from({ length: 60 }, (_, i) =>
      entry('many', { [`k${i % 25}`]: i, ...(i % 2 ? { x: 1 } : {}) }),
    );
    entries.push(
      entry('nul', { 'a\u0000': 1, b: 2 }),
      entry('nul', { a: 1, '\u0000b': 2 }),
      entry('nul', { 'a\u0000': 3, b: 4 }),
    );
    const message = JSON.parse(packAudit(entries)) as { columns: string[][] };
    const names = message.columns.map((keys) => JSON.stringify(keys));
    expect(new Set(names).size).toBe(names.length);
    expect(names).toHaveLength(52);
    expect(JSON.stringify(unpackAudit(message))).toBe(JSON.stringify(entries));
  });

  it('packs a read round as it always did (the stored text is unchanged)', () => {
    const call = { toolVersion: 'contract:abc', callId: 'c1', tool: 'noop', argsHash: 'sha256:aa' };
    const entries = [
      entry('model_output', { output: 'model.toolsProposed', calls: 1, moves: 'cv/1d' }),
      entry('gate', { callId: null, tool: null, argsHash: null, gate: 'protocol', decision: 'pass', moves: '0q' }),
      entry('gate', { ...call, gate: 'schema', decision: 'pass', moves: '' }),
      entry('tool_started', { ...call, args: { n: 1 }, moves: '32' }),
      entry('tool_finished', { ...call, at: 9, argsHash: undefined, code: 'ok', moves: '1x' }),
    ];
    // The text main wrote before packing went straight to rows (an end without its hash keeps its call keys).
    expect(packAudit(entries)).toBe(
      '{"stamp":{"model":{"id":"m","version":"v1"},"prompt":"p1","policy":"policy-1","session":"s1"},"share' +
        'd":[0,1,2,3,4],"since":1,"calls":[{"toolVersion":"contract:abc","callId":"c1","tool":"noop","argsHas' +
        'h":"sha256:aa"}],"called":[[2,0],[3,0]],"moves":"cv/1d 0q  32 1x","columns":[["at","turn","kind","ou' +
        'tput","calls"],["at","turn","kind","callId","tool","argsHash","gate","decision"],["at","turn","kind"' +
        ',"toolVersion","callId","tool","argsHash","gate","decision"],["at","turn","kind","toolVersion","call' +
        'Id","tool","argsHash","args"]],"table":[[0,0,2,"model_output","model.toolsProposed",1],[1,0,2,"gate"' +
        ',null,null,null,"protocol","pass"],[2,0,2,"gate",0,0,0,0,"schema","pass"],[3,0,2,"tool_started",0,0,' +
        '0,0,{"n":1}],[-1,{"at":8,"turn":2,"kind":"tool_finished","toolVersion":"contract:abc","callId":"c1",' +
        '"tool":"noop","code":"ok"}]]}',
    );
  });

  it('reads back the time of an entry kept whole because it has its own toJSON key', () => {
    const stamp = { model: 'm', prompt: 'p', policy: 'q', session: 's' };
    const entries = [
      { at: 1000, turn: 0, ...stamp, kind: 'a' },
      { at: 1010, turn: 0, ...stamp, kind: 'b' },
      { at: 5, toJSON: 'x' },
      { at: 'later', toJSON: 'y' },
    ];
    expect(unpackAudit(JSON.parse(packAudit(entries)))).toEqual(entries);
  });

  it('packs as before with an enumerable key on Object.prototype (own keys only, as JSON writes them)', () => {
    const entries = [entry('a', { callId: 'c1', tool: 't' }), entry('b', { callId: 'c1', tool: 't', moves: '0a' })];
    const texts: string[] = [];
    Object.defineProperty(Object.prototype, 'polluted', { value: 1, enumerable: true, configurable: true });
    try {
      texts.push(packAudit(entries), packAuditBefore(entries));
    } finally {
      delete (Object.prototype as Record<string, unknown>).polluted;
    }
    expect(texts[0]).toBe(texts[1]);
    expect(texts[0]).toBe(packAudit(entries));
  });

  it('packs an entry whose getter packs other entries (the scratch arrays of one packing are not shared)', () => {
    const inner = [entry('x', { callId: 'c9', tool: 'u' }), entry('y', { callId: 'c9', tool: 'u', extra: [1] })];
    const outer = [entry('a', { callId: 'c1', tool: 't' }), entry('b', { callId: 'c1', tool: 't' })];
    Object.defineProperty(outer[1], 'late', { get: () => packAudit(inner).length, enumerable: true });
    expect(packAudit(outer)).toBe(packAuditBefore(outer));
    expect(packAudit(inner)).toBe(packAuditBefore(inner));
  });

  it('refuses a message that is neither form', () => {
    expect(unpackAudit({ entries: [] })).toBeNull();
    expect(unpackAudit('text')).toBeNull();
  });
});
