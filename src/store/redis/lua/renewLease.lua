#!lua
--[[
  Extends a lease, only if the given token still holds it.

  KEYS[1]  lease string
  ARGV[1]  holder's token
  ARGV[2]  new time to live (ms, positive integer)

  Returns {code, detail}:
    { 1, "" }   renewed
    { 0, "" }   not held by this token (expired, released, or taken by another holder)
    {-6, key }  the lease key holds another Redis type
]]
local actual = redis.call('TYPE', KEYS[1])['ok']
if actual ~= 'none' and actual ~= 'string' then return {-6, KEYS[1]} end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, ''}
