#!lua
--[[
  Records why a task must not be restored, unless the task was erased (a marker would outlive the erasure).

  KEYS[1]  quarantine hash (task id -> reason)
  KEYS[2]  tombstone string
  ARGV[1]  task id
  ARGV[2]  reason

  Returns {code, detail}:
    { 1, "" }         recorded
    {-7, key }        the quarantine hash holds another Redis type
    {-9, tombstone }  the task was erased
]]
local actual = redis.call('TYPE', KEYS[1])['ok']
if actual ~= 'none' and actual ~= 'hash' then return {-7, KEYS[1]} end
local tombstoneType = redis.call('TYPE', KEYS[2])['ok']
if tombstoneType == 'string' then return {-9, redis.call('GET', KEYS[2])} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1, ''}
