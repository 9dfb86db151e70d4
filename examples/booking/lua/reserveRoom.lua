--[[
  Reserves a room, with the semantics of BookingService.reserve, all in one atomic step: a known idempotency key
  returns its booking; otherwise the room must exist, be at the expected schedule version and be free in the
  interval; then the booking is committed (next number, version + 1, key recorded). The "lose the response"
  fault is consumed here, with the commit, so only a committed reservation can lose its response.

  KEYS[1]  rooms hash: room id -> room JSON        KEYS[5]  booking number counter (string integer)
  KEYS[2]  versions hash: room id -> version       KEYS[6]  this room's booking ids (list)
  KEYS[3]  bookings hash: booking id -> row JSON   KEYS[7]  faults hash
  KEYS[4]  keys hash: idempotency key -> booking   KEYS[8]  reservation requests counter

  ARGV[1]  room id          ARGV[2]  start_at (text)   ARGV[3]  end_at (text)
  ARGV[4]  start (ms)       ARGV[5]  end (ms)          ARGV[6]  attendees
  ARGV[7]  requester id     ARGV[8]  idempotency key   ARGV[9]  expected version

  Returns:
    {1, row JSON, lost}  committed now; lost = 1 when the response is to be lost (a fault)
    {2, row JSON}        the key was seen before: its booking
    {0, detail}          conflict: no such room, another version, or the interval is taken
]]
local roomId, key = ARGV[1], ARGV[8]
local startMs, endMs = tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('INCR', KEYS[8])

local existing = redis.call('HGET', KEYS[4], key)
if existing then return {2, redis.call('HGET', KEYS[3], existing)} end

if redis.call('HEXISTS', KEYS[1], roomId) == 0 then return {0, 'room ' .. roomId .. ' does not exist'} end
local version = tonumber(redis.call('HGET', KEYS[2], roomId))
if version ~= tonumber(ARGV[9]) then
  return {0, roomId .. ' changed since it was read (version ' .. version .. ', not ' .. ARGV[9] .. '); search again'}
end
for _, id in ipairs(redis.call('LRANGE', KEYS[6], 0, -1)) do
  local row = cjson.decode(redis.call('HGET', KEYS[3], id))
  if row.startMs < endMs and startMs < row.endMs then
    return {0, roomId .. ' is already booked in that interval'}
  end
end

local bookingId = 'B' .. redis.call('INCR', KEYS[5])
local row = cjson.encode({
  bookingId = bookingId, roomId = roomId, startAt = ARGV[2], endAt = ARGV[3], startMs = startMs, endMs = endMs,
  attendees = tonumber(ARGV[6]), requesterId = ARGV[7], idempotencyKey = key,
})
redis.call('HSET', KEYS[3], bookingId, row)
redis.call('RPUSH', KEYS[6], bookingId)
redis.call('HINCRBY', KEYS[2], roomId, 1)
redis.call('HSET', KEYS[4], key, bookingId)

local lost = 0
if tonumber(redis.call('HGET', KEYS[7], 'loseReserveResponses') or '0') > 0 then
  redis.call('HINCRBY', KEYS[7], 'loseReserveResponses', -1)
  lost = 1
end
return {1, row, lost}
