/**
 * How the audit entries of one save are kept in their Redis stream message. Every entry of agent/5 on carries the
 * same stamp (model, prompt, policy, session) as the others of its save, except the few a user's event caused: the
 * stamp is kept once per message and left out of the entries that share it, which keeps about a third of the audit's
 * bytes out of Redis. Reading puts it back, so what `readJournal` returns is what was saved.
 *
 * A message is a JSON array (unpacked: older saves, and saves whose entries share no stamp) or
 * `{ "stamp": {...}, "shared": [indexes], "entries": [...] }`, where the entries at `shared` take the stamp.
 */
const STAMP_KEYS = ['model', 'prompt', 'policy', 'session'] as const;

type Row = Record<string, unknown>;

const isRow = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The stream message text of one save's audit entries. */
export function packAudit(entries: readonly unknown[]): string {
  const plain = () => `[${entries.map((entry) => JSON.stringify(entry) ?? 'null').join(',')}]`;
  const first = entries[0];
  if (entries.length < 2 || !isRow(first) || !STAMP_KEYS.every((key) => key in first)) return plain();
  const stamp = STAMP_KEYS.map((key) => JSON.stringify(first[key]));
  const shares = (entry: unknown): entry is Row => isRow(entry) && STAMP_KEYS.every((key, i) => key in entry && JSON.stringify(entry[key]) === stamp[i]);
  const shared: number[] = [];
  const packed = entries.map((entry, index) => {
    if (!shares(entry)) return entry;
    shared.push(index);
    const { model: _model, prompt: _prompt, policy: _policy, session: _session, ...rest } = entry;
    return rest;
  });
  return JSON.stringify({ stamp: Object.fromEntries(STAMP_KEYS.map((key) => [key, first[key]])), shared, entries: packed });
}

/** The entries of a parsed stream message, or null when it is neither form. */
export function unpackAudit(message: unknown): unknown[] | null {
  if (Array.isArray(message)) return message;
  if (!isRow(message) || !isRow(message.stamp) || !Array.isArray(message.shared) || !Array.isArray(message.entries)) return null;
  const stamp = message.stamp;
  const shared = new Set(message.shared);
  return message.entries.map((entry, index) => {
    if (!isRow(entry) || !shared.has(index)) return entry;
    // The stamp goes back where it was: after `at` and `turn`, before the entry's own fields.
    const whole: Row = {};
    if ('at' in entry) whole.at = entry.at;
    if ('turn' in entry) whole.turn = entry.turn;
    Object.assign(whole, stamp);
    for (const [key, value] of Object.entries(entry)) if (key !== 'at' && key !== 'turn') whole[key] = value;
    return whole;
  });
}
