#!lua flags=no-writes
--[[
  Reads committed journal entries [from, to) of a task (0-based, Array.prototype.slice semantics over the
  committed part): entries past the length the task hash records were never acknowledged and are never returned.
  Flagged no-writes, so it also runs on a replica and while Redis is out of memory.

  The transcript is a list: the entries come back one per element. The audit journal is a stream with one message
  per save (id "<n>-0", n = 1-based number of its first entry; fields entries = JSON array, count): the messages
  overlapping [from, to) come back as pairs (first entry number, JSON array) for the caller to cut.

  KEYS[1]  task hash
  KEYS[2]  journal: the audit stream or the transcript list
  ARGV[1]  task hash field holding the committed length ("auditLength" / "transcriptLength")
  ARGV[2]  from (integer, may be negative)
  ARGV[3]  to (integer, may be negative), "" for the committed end

  Returns {code, detail}:
    { 1, {entry, ...} }                      list: the entries (JSON text), possibly none
    { 2, {from, to, first, array, ...} }     stream: the clamped range, then message start numbers and arrays
    {-6, key }                               a key holds another Redis type
]]
local hashType = redis.call('TYPE', KEYS[1])['ok']
if hashType ~= 'none' and hashType ~= 'hash' then return {-6, KEYS[1]} end
local journalType = redis.call('TYPE', KEYS[2])['ok']
if journalType ~= 'none' and journalType ~= 'list' and journalType ~= 'stream' then return {-6, KEYS[2]} end
local committed = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')

local function clamp(index)
  if index < 0 then index = math.max(committed + index, 0) end
  return math.min(index, committed)
end
local from = clamp(tonumber(ARGV[2]))
local to = committed
if ARGV[3] ~= '' then to = clamp(tonumber(ARGV[3])) end
if to <= from then return {1, {}} end
if journalType ~= 'stream' then return {1, redis.call('LRANGE', KEYS[2], from, to - 1)} end

-- The message holding entry number from + 1 is the last one starting at or before it.
local start = '-'
local before = redis.call('XREVRANGE', KEYS[2], (from + 1) .. '-0', '-', 'COUNT', 1)
if #before > 0 then start = before[1][1] end
local out = {from, to}
for _, message in ipairs(redis.call('XRANGE', KEYS[2], start, to .. '-0')) do
  local fields = message[2]
  local array
  for i = 1, #fields, 2 do
    if fields[i] == 'entries' then array = fields[i + 1] end
  end
  out[#out + 1] = tonumber(string.match(message[1], '^(%d+)'))
  out[#out + 1] = array or '[]'
end
return {2, out}
