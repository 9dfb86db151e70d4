#!lua
--[[
  Gives a lease up, only if the given token still holds it (never deletes another holder's lease).

  KEYS[1]  lease string
  ARGV[1]  holder's token

  Returns {code, detail}:
    { 1, "" }   released
    { 0, "" }   not held by this token; nothing changed
    {-6, key }  the lease key holds another Redis type
]]
local actual = redis.call('TYPE', KEYS[1])['ok']
if actual ~= 'none' and actual ~= 'string' then return {-6, KEYS[1]} end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, ''} end
redis.call('DEL', KEYS[1])
return {1, ''}
