/** The audit entries of one save keep their shared stamp once per Redis stream message, and read back whole. */
import { describe, expect, it } from 'vitest';
import { packAudit, unpackAudit } from '../src/store/redis/redisAuditPacking.js';

const stamp = { model: { id: 'm', version: 'v1' }, prompt: 'p1', policy: 'policy-1', session: 's1' };
const entry = (kind: string, extra: Record<string, unknown> = {}) => ({ at: 1, turn: 2, ...stamp, kind, ...extra });

describe('the audit of one save in its stream message', () => {
  it('keeps the stamp once, and reads back exactly the entries saved', () => {
    const entries = [entry('model_output'), entry('gate', { toolVersion: 'contract:x', tool: 't' }), { ...entry('confirmation'), session: 'phone' }, entry('tool_started')];
    const text = packAudit(entries);
    expect(text.split('"policy-1"')).toHaveLength(3); // once in the stamp, once in the entry that differs
    expect(text.length).toBeLessThan(JSON.stringify(entries).length);
    expect(unpackAudit(JSON.parse(text))).toEqual(entries);
  });

  it('leaves a single entry, entries without a stamp (before agent/5), and odd values as a plain array', () => {
    for (const entries of [[entry('x')], [{ at: 1, turn: 1, kind: 'old' }, { at: 2, turn: 1, kind: 'old' }], [null, 3]]) {
      const text = packAudit(entries);
      expect(JSON.parse(text)).toEqual(entries);
      expect(unpackAudit(JSON.parse(text))).toEqual(entries);
    }
  });

  it('gives the stamp back only to the entries that shared it (a host entry without one stays as it was)', () => {
    const entries = [entry('a'), { kind: 'test_marker', n: 1 }, entry('b')];
    expect(unpackAudit(JSON.parse(packAudit(entries)))).toEqual(entries);
  });

  it('refuses a message that is neither form', () => {
    expect(unpackAudit({ entries: [] })).toBeNull();
    expect(unpackAudit('text')).toBeNull();
  });
});
