#!lua
--[[
  Adds a task saved before owner indexes existed to its owner's index (the migration `RedisStore.indexOwners`
  runs). A no-op for a task that already has one recorded (every save by this version records it) and for a task
  erased meanwhile, so it is safe while other processes save and erase.

  KEYS[1]  task hash
  KEYS[2]  index: the owner's tasks (zset), from the summary the caller read
  ARGV[1]  task id
  ARGV[2]  updatedAt (ms), the score

  Returns {code, detail}:
    { 1, "" }   indexed
    { 0, "" }   nothing to do (indexed already, or no such task hash)
    {-7, key }  the owner index holds another Redis type
]]
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return {0, ''} end
if redis.call('HEXISTS', KEYS[1], 'owner') == 1 then return {0, ''} end
local actual = redis.call('TYPE', KEYS[2])['ok']
if actual ~= 'none' and actual ~= 'zset' then return {-7, KEYS[2]} end
redis.call('HSET', KEYS[1], 'owner', KEYS[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return {1, ''}
