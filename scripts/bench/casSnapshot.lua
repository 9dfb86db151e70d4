--[[
  The bare loop's save (scripts/bench/bareLoop.ts): a compare-and-set of a task's snapshot plus the append of the
  transition's history entry, atomically.

  KEYS[1]  snapshot hash: fields `rev` (revision) and `snapshot` (XState's persisted snapshot, JSON)
  KEYS[2]  history list: one JSON entry per transition
  ARGV[1]  expected revision (0: the task must not exist yet)
  ARGV[2]  the new snapshot
  ARGV[3]  the history entry

  Returns the new revision, or -1 when the stored revision is not the expected one (nothing is written).
]]
local current = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
if current ~= tonumber(ARGV[1]) then
  return -1
end
redis.call('HSET', KEYS[1], 'rev', current + 1, 'snapshot', ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
return current + 1
