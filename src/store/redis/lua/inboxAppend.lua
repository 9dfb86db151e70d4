#!lua
--[[
  Appends one event to a task's inbox (dispatch): the next sequence number and the entry, in one atomic step, and
  the task in the bucket's index of inboxes with unapplied events (scored by the time of its oldest one), so that a
  sweep finds an event whose job was lost. Refused for an erased task, so that nothing is recorded under an id whose
  data must be gone.

  KEYS[1]  inbox list   KEYS[2]  inbox sequence counter   KEYS[3]  tombstone string   KEYS[4]  index: inboxes (zset)
  ARGV[1]  the entry (JSON)
  ARGV[2]  the most entries an inbox may hold unapplied
  ARGV[3]  task id
  ARGV[4]  now (ms)

  Returns { seq, "" } appended; { -9, tombstone } erased; { -13, length } the inbox is full; { -6, key } wrong type.
]]
local inboxKey, seqKey, tombstoneKey, indexKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local tombstone = redis.call('GET', tombstoneKey)
if tombstone then return {-9, tombstone} end
local kind = redis.call('TYPE', inboxKey)['ok']
if kind ~= 'none' and kind ~= 'list' then return {-6, inboxKey} end
local length = redis.call('LLEN', inboxKey)
if length >= tonumber(ARGV[2]) then return {-13, tostring(length)} end
local seq = redis.call('INCR', seqKey)
redis.call('RPUSH', inboxKey, string.format('%d', seq) .. ' ' .. ARGV[1])
redis.call('ZADD', indexKey, 'NX', ARGV[4], ARGV[3])
return {seq, ''}
