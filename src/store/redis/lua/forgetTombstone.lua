#!lua
--[[
  Removes the tombstone of a task erased at or before a cutoff (the tombstones' retention). The id can then be
  created again.

  KEYS[1]  tombstone string
  KEYS[2]  index: erased tasks by erasedAt (zset)
  ARGV[1]  task id
  ARGV[2]  cutoff (ms)

  Returns {code, detail}:
    { 1, "" }   removed
    { 0, "" }   not erased at or before the cutoff (or not erased); nothing changed
    {-7, key }  the erased index holds another Redis type
]]
local actual = redis.call('TYPE', KEYS[2])['ok']
if actual ~= 'none' and actual ~= 'zset' then return {-7, KEYS[2]} end
local erasedAt = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not erasedAt or tonumber(erasedAt) > tonumber(ARGV[2]) then return {0, ''} end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return {1, ''}
