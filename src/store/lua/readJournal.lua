#!lua flags=no-writes
--[[
  Reads committed journal entries [from, to) of a task, with Array.prototype.slice semantics over the committed
  part: entries past the length the envelope references were never acknowledged and are never returned.
  Flagged no-writes, so it also runs on a replica and while Redis is out of memory.

  KEYS[1]  task hash
  KEYS[2]  journal: the audit stream (entry ids "<n>-0", n 1-based) or the transcript list
  ARGV[1]  task hash field holding the committed length ("auditLength" / "transcriptLength")
  ARGV[2]  from (integer, may be negative)
  ARGV[3]  to (integer, may be negative), "" for the committed end

  Returns {code, detail}:
    { 1, {entry, ...} }  the entries (JSON text), possibly none
    {-6, key }           a key holds another Redis type
]]
local journalType = redis.call('TYPE', KEYS[2])['ok']
local hashType = redis.call('TYPE', KEYS[1])['ok']
if hashType ~= 'none' and hashType ~= 'hash' then return {-6, KEYS[1]} end
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
local entries = {}
for _, item in ipairs(redis.call('XRANGE', KEYS[2], (from + 1) .. '-0', to .. '-0')) do
  entries[#entries + 1] = item[2][2]
end
return {1, entries}
