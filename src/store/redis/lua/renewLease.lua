#!lua
--[[
  Extends a lease, only if the given token still holds it, and only in the data set the holder learned (see
  save.lua): after a data loss the lease is not merely lost, the holder is told why.

  KEYS[1]  lease string
  KEYS[2]  epoch marker (string)
  ARGV[1]  holder's token
  ARGV[2]  new time to live (ms, positive integer)
  ARGV[3]  the epoch the holder learned, "" for none
  ARGV[4]  a new epoch, created when the holder learned none and there is none ("" otherwise)

  Returns {code, detail[, epoch]}:
    { 1, "", epoch }  renewed; the epoch in effect
    { 0, "" }         not held by this token (expired, released, or taken by another holder)
    {-6, key }        the lease key holds another Redis type
    {-11, epoch found|""} the data set is not the one the holder learned: its marker is gone or differs
    {-12, key }       the epoch marker holds another Redis type
]]
local epoch = redis.pcall('GET', KEYS[2])
if type(epoch) == 'table' and epoch.err then return {-12, KEYS[2]} end
if ARGV[3] ~= '' and epoch ~= ARGV[3] then return {-11, epoch or ''} end
local actual = redis.call('TYPE', KEYS[1])['ok']
if actual ~= 'none' and actual ~= 'string' then return {-6, KEYS[1]} end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if not epoch and ARGV[4] ~= '' then
  redis.call('SET', KEYS[2], ARGV[4], 'NX')
  epoch = ARGV[4]
end
return {1, '', epoch}
