--[[
  Writes the demo's rooms and orders once: a prefix already seeded is left as it is, so every process of a
  cross-process test may call it.

  KEYS[1]  seeded flag     KEYS[2]  rooms hash      KEYS[3]  versions hash   KEYS[4]  booking number counter
  KEYS[5]  orders hash     KEYS[6]  refund number counter

  ARGV[1]  first booking number - 1     ARGV[2]  first refund number - 1
  ARGV[3]  number of rooms (R), then R triples: room id, room JSON, version; then the orders as pairs: id, JSON

  Returns 1 when it seeded, 0 when the prefix was seeded already.
]]
if redis.call('SET', KEYS[1], '1', 'NX') == false then return 0 end
redis.call('SET', KEYS[4], ARGV[1])
redis.call('SET', KEYS[6], ARGV[2])
local rooms = tonumber(ARGV[3])
local i = 4
for _ = 1, rooms do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
  i = i + 3
end
while i < #ARGV do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return 1
