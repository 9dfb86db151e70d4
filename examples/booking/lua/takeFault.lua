--[[
  Consumes one occurrence of an injected fault, atomically, so that of several processes exactly one sees it.

  KEYS[1]  faults hash
  ARGV[1]  fault name (a field holding a count)

  Returns 1 when an occurrence was taken (the caller must now misbehave), 0 when none is left.
]]
local left = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if left <= 0 then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
return 1
