#!lua
--[[
  Erases a task: deletes its hash (envelope, summary, counters), both journals, its lease and fence counter, its
  entries in every index and its quarantine marker, and writes its tombstone, all in one atomic step. Every check
  happens before the first write, so a refused erasure changes nothing.

  A task queued for dispatch and not yet created counts as stored: its inbox counter (and inbox) exist, and its
  erasure leaves a tombstone, so that a worker cannot create it afterwards.

  Keys of other Redis types under the task's own names are deleted all the same: an erasure must not be stopped
  by data it cannot read. The owner index is the key the task hash records (the save script set it from a
  declared key, under the same {prefix} hash tag, so it is in this slot); a recorded value that is not an owner
  index of this store is not followed.

  Cost: O(number of indexes); the journals are UNLINKed, so Redis frees long ones in the background.

  KEYS[1]  task hash          KEYS[6]   index: updatedAt (zset)     KEYS[11]    inbox list
  KEYS[2]  audit stream       KEYS[7]   index: wakeAt (zset)        KEYS[12]    inbox sequence counter
  KEYS[3]  transcript list    KEYS[8]   quarantine hash             KEYS[13]    index: inboxes (zset)
                                                                   KEYS[14..]  index per state (zset)
  KEYS[4]  fence counter      KEYS[9]   tombstone string
  KEYS[5]  lease string       KEYS[10]  index: erased tasks by erasedAt (zset)

  ARGV[1]  task id
  ARGV[2]  the tombstone JSON up to the value of its last member, `removed`, which this script appends
  ARGV[3]  erasedAt (ms): the score in the erased index
  ARGV[4]  what every owner index key starts with
  ARGV[5]  retention cutoff (ms): "" erases unconditionally; otherwise only a task in one of the states ARGV[6..]
           whose updatedAt is at or before it
  ARGV[6..] finished state names (with a cutoff)

  Returns {code, detail}:
    { 1, tombstone }  erased; the new tombstone
    { 2, tombstone }  erased before: the first tombstone (anything left under the task's keys is deleted again)
    { 0, "" }         nothing is stored under this id
    { 3, "" }         left alone: the retention condition does not hold (any more)
    {-6, key }        the tombstone key holds another Redis type
    {-7, key }        an index key holds another Redis type
]]
local taskKey, auditKey, transcriptKey, fenceKey, leaseKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local updatedKey, wakeKey, quarantineKey, tombstoneKey, erasedKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local inboxKey, inboxSeqKey, inboxIndexKey = KEYS[11], KEYS[12], KEYS[13]
local taskId, head, erasedAt, ownerPrefix, cutoff = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local function typeOf(key) return redis.call('TYPE', key)['ok'] end

local hashType = typeOf(taskKey)
local stored = {}
if hashType == 'hash' then
  local fields = redis.call('HMGET', taskKey, 'state', 'auditLength', 'owner')
  stored = {state = fields[1], auditLength = fields[2], owner = fields[3]}
end
local owner = stored.owner
if owner and string.sub(owner, 1, #ownerPrefix) ~= ownerPrefix then owner = nil end

-- Index keys: a wrong type would fail a ZREM after something was deleted, so look first.
local indexes = {updatedKey, wakeKey, erasedKey}
indexes[#indexes + 1] = inboxIndexKey
for i = 14, #KEYS do indexes[#indexes + 1] = KEYS[i] end
if owner then indexes[#indexes + 1] = owner end
for _, key in ipairs(indexes) do
  local actual = typeOf(key)
  if actual ~= 'none' and actual ~= 'zset' then return {-7, key} end
end
local quarantineType = typeOf(quarantineKey)
if quarantineType ~= 'none' and quarantineType ~= 'hash' then return {-7, quarantineKey} end
local tombstoneType = typeOf(tombstoneKey)
if tombstoneType ~= 'none' and tombstoneType ~= 'string' then return {-6, tombstoneKey} end

local existing = redis.call('GET', tombstoneKey)
local quarantined = quarantineType == 'hash' and redis.call('HEXISTS', quarantineKey, taskId) == 1
local auditType, transcriptType = typeOf(auditKey), typeOf(transcriptKey)
if not existing then
  local queued = redis.call('EXISTS', inboxKey, inboxSeqKey) > 0
  if hashType == 'none' and auditType == 'none' and transcriptType == 'none' and not quarantined and not queued then return {0, ''} end
  if cutoff ~= '' then
    local finished = false
    for i = 6, #ARGV do
      if stored.state == ARGV[i] then finished = true end
    end
    local updatedAt = redis.call('ZSCORE', updatedKey, taskId)
    if not finished or not updatedAt or tonumber(updatedAt) > tonumber(cutoff) then return {3, ''} end
  end
end

local transcriptCount = 0
if transcriptType == 'list' then transcriptCount = redis.call('LLEN', transcriptKey) end
local auditCount = tonumber(stored.auditLength or '0') or 0

redis.call('UNLINK', taskKey, auditKey, transcriptKey, fenceKey, leaseKey, inboxKey, inboxSeqKey)
for i = 6, #KEYS do
  if i == 6 or i == 7 or i >= 13 then redis.call('ZREM', KEYS[i], taskId) end
end
if owner then redis.call('ZREM', owner, taskId) end
if quarantined then redis.call('HDEL', quarantineKey, taskId) end
if existing then return {2, existing} end

local tombstone = head .. '{"snapshot":' .. tostring(hashType ~= 'none') ..
  ',"audit":' .. string.format('%d', auditCount) ..
  ',"transcript":' .. string.format('%d', transcriptCount) ..
  ',"quarantine":' .. tostring(quarantined) .. '}}'
redis.call('SET', tombstoneKey, tombstone)
redis.call('ZADD', erasedKey, erasedAt, taskId)
return {1, tombstone}
