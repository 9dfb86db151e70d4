#!lua
--[[
  Takes a task's lease if nobody holds it, and draws the next fencing token in the same step, so every
  acquisition gets a strictly larger fence than any before it.

  The data set is checked first (see save.lua): after a data loss the fence counters are gone too, and a new
  acquisition would hand out fences again from 1. A taker that learned no epoch creates the marker if there is none.
  An erased task has no lease to take: nothing may drive it, and taking one would leave a fence counter behind.

  KEYS[1]  lease string (holder's token, PX expiry)
  KEYS[2]  fence counter (string integer; never expires, except with an erasure)
  KEYS[3]  tombstone string
  KEYS[4]  epoch marker (string)
  KEYS[5]  task hash (read with ARGV[6])
  KEYS[6]  quarantine hash (read with ARGV[6])
  ARGV[1]  new holder's random token
  ARGV[2]  time to live (ms, positive integer)
  ARGV[3]  the epoch the taker learned, "" for none
  ARGV[4]  a new epoch, created when the taker learned none and there is none ("" otherwise)
  ARGV[5]  the task id (its field in the quarantine hash)
  ARGV[6]  "1": also read what a take-over reads next, once the lease is taken (same step, so nobody can have
           saved in between); "" not

  Returns {code, detail, ...}:
    { 1, fence, epoch, 0 }  acquired; fence is the new counter value; the epoch in effect; nothing read
    { 1, fence, epoch, 1, envelope|nil, revision|nil, reason|nil }  the same, with ARGV[6] (and the task and
                         quarantine keys of their type): the task hash's envelope and revision fields and the task's
                         quarantine reason
    { 0, "" }            another holder has the lease
    {-6, key }           a key holds another Redis type
    {-9, tombstone }     the task was erased
    {-11, epoch found|""} the data set is not the one the taker learned: its marker is gone or differs
    {-12, key }          the epoch marker holds another Redis type
]]
local leaseKey, fenceKey, tombstoneKey, epochKey, taskKey, quarantineKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local reads = ARGV[6] == '1'
local epoch = redis.pcall('GET', epochKey)
if type(epoch) == 'table' and epoch.err then return {-12, epochKey} end
if ARGV[3] ~= '' and epoch ~= ARGV[3] then return {-11, epoch or ''} end
for _, pair in ipairs({{leaseKey, 'string'}, {fenceKey, 'string'}, {tombstoneKey, 'string'}}) do
  local actual = redis.call('TYPE', pair[1])['ok']
  if actual ~= 'none' and actual ~= pair[2] then return {-6, pair[1]} end
end
-- A task or quarantine key of another type is not read here: the taker's own reads meet it and say what is wrong
-- (a task is then quarantined, as it would be without these reads).
for _, key in ipairs({taskKey, quarantineKey}) do
  local actual = reads and redis.call('TYPE', key)['ok']
  if actual and actual ~= 'none' and actual ~= 'hash' then reads = false end
end
local tombstone = redis.call('GET', tombstoneKey)
if tombstone then return {-9, tombstone} end
if not redis.call('SET', leaseKey, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, ''}
end
if not epoch and ARGV[4] ~= '' then
  redis.call('SET', epochKey, ARGV[4], 'NX')
  epoch = ARGV[4]
end
local fence = tostring(redis.call('INCR', fenceKey))
if not reads then return {1, fence, epoch, 0} end
local stored = redis.call('HMGET', taskKey, 'envelope', 'revision')
return {1, fence, epoch, 1, stored[1], stored[2], redis.call('HGET', quarantineKey, ARGV[5])}
