#!lua
--[[
  A tenant's slots of running tasks (`capacity.tenantCap`), shared by every process: a sorted set of task ids scored
  by their expiry (ms, Redis server time, so that the processes' clocks need not agree). Every call first drops the
  expired slots (a dead holder's free themselves), then counts, takes, renews or gives back, in one atomic step.
  The key expires with its last slot.

  KEYS[1]  the tenant's slots (sorted set)
  ARGV[1]  "take", "release" or "count"
  ARGV[2]  the task id (take, release)
  ARGV[3]  time to live of the slot (ms, positive integer; take)
  ARGV[4]  the cap: refuse a new slot when this many are held by other tasks; "" for none (take)

  Returns {code, detail}:
    { 1, count }  take: the slot was taken; count held now, this one included
    { 2, count }  take: the task held it already, renewed
    { 0, count }  take: refused, `count` (>= cap) slots held by other tasks; nothing changed
    { 1, "" }     release: given back (or held none)
    { 1, count }  count: unexpired slots held now
    {-7, key }    the key holds another Redis type
]]
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then return {-7, KEYS[1]} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local op = ARGV[1]
if op == 'count' then return {1, redis.call('ZCARD', KEYS[1])} end
if op == 'release' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return {1, ''}
end
local count = redis.call('ZCARD', KEYS[1])
local held = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not held and ARGV[4] ~= '' and count >= tonumber(ARGV[4]) then return {0, count} end
local expiry = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], expiry, ARGV[2])
-- The key lives as long as its latest slot.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
if held then return {2, count} end
return {1, count + 1}
