#!lua
--[[
  Takes a task's lease if nobody holds it, and draws the next fencing token in the same step, so every
  acquisition gets a strictly larger fence than any before it.

  An erased task has no lease to take: nothing may drive it, and taking one would leave a fence counter behind.

  KEYS[1]  lease string (holder's token, PX expiry)
  KEYS[2]  fence counter (string integer; never expires, except with an erasure)
  KEYS[3]  tombstone string
  ARGV[1]  new holder's random token
  ARGV[2]  time to live (ms, positive integer)

  Returns {code, detail}:
    { 1, fence }     acquired; fence is the new counter value
    { 0, "" }        another holder has the lease
    {-6, key }       a key holds another Redis type
    {-9, tombstone } the task was erased
]]
local leaseKey, fenceKey, tombstoneKey = KEYS[1], KEYS[2], KEYS[3]
for _, pair in ipairs({{leaseKey, 'string'}, {fenceKey, 'string'}, {tombstoneKey, 'string'}}) do
  local actual = redis.call('TYPE', pair[1])['ok']
  if actual ~= 'none' and actual ~= pair[2] then return {-6, pair[1]} end
end
local tombstone = redis.call('GET', tombstoneKey)
if tombstone then return {-9, tombstone} end
if not redis.call('SET', leaseKey, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, ''}
end
return {1, tostring(redis.call('INCR', fenceKey))}
