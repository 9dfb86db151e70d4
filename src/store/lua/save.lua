#!lua
--[[
  Saves a task: one atomic compare-and-set of the envelope plus the append of its new journal entries and the
  update of every index. Everything is checked before the first write, so a refused save changes nothing.
  The shebang makes Redis refuse the whole script up front when it is out of memory, instead of failing at the
  first write. Cost does not depend on journal length: journals are only measured and appended to, never read.
  The audit journal is a stream (XADD) whose entry ids are the 1-based entry numbers ("<n>-0"), so a range of
  entries maps to an XRANGE; the transcript is a list.
  Fencing: a presented fence must equal the task's fence counter, i.e. nobody acquired the lease after this
  writer. A writer whose lease merely expired, with no acquisition since, is still accepted: fencing guards
  against a newer holder, and expiry alone does not create one.

  KEYS[1]   task hash                    KEYS[5]  lease string (token, PX)
  KEYS[2]   audit stream                 KEYS[6]  index: all tasks by updatedAt (zset)
  KEYS[3]   transcript list              KEYS[7]  index: tasks by wakeAt (zset)
  KEYS[4]   fence counter (string)       KEYS[8..7+S]  index per state (zset), aligned with the state names below

  ARGV[1]   task id (the member in the indexes)
  ARGV[2]   expected revision (0 = the task must not exist)
  ARGV[3]   new revision
  ARGV[4]   fence presented by the writer, "" for none
  ARGV[5]   envelope JSON                ARGV[6]  summary JSON
  ARGV[7]   new state name               ARGV[8]  updatedAt (ms)
  ARGV[9]   wakeAt (ms), "" for none
  ARGV[10]  audit length before the append       ARGV[11]  transcript length before the append
  ARGV[12]  number of audit entries (A)          ARGV[13]  number of transcript entries (T)
  ARGV[14..13+S]           state names, aligned with KEYS[8..]
  ARGV[14+S..13+S+A]       audit entries (JSON)
  ARGV[14+S+A..13+S+A+T]   transcript entries (JSON)

  Returns {code, detail}:
    { 1, new revision }        saved
    {-1, "" }                  the task exists (expected revision 0)
    {-2, current revision|""}  revision conflict
    {-3, current fence}        the presented fence is not the current one (a newer lease was taken)
    {-4, "" }                  no fence presented while another holder has the lease
    {-5, current revision}     a journal's length differs from the one the envelope expects
    {-6, key }                 a task key holds another Redis type
    {-7, key }                 an index key holds another Redis type
    {-8, state }               unknown state name
]]
local taskKey, auditKey, transcriptKey, fenceKey, leaseKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local updatedKey, wakeKey = KEYS[6], KEYS[7]
local taskId, expected, revision, fence = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local state, updatedAt, wakeAt = ARGV[7], ARGV[8], ARGV[9]
local stateCount = #KEYS - 7
local auditCount, transcriptCount = tonumber(ARGV[12]), tonumber(ARGV[13])
local firstEntry = 14 + stateCount

local function wrongType(key, expectedType)
  local actual = redis.call('TYPE', key)['ok']
  return actual ~= 'none' and actual ~= expectedType
end

for _, pair in ipairs({{taskKey, 'hash'}, {auditKey, 'stream'}, {transcriptKey, 'list'}, {fenceKey, 'string'}, {leaseKey, 'string'}}) do
  if wrongType(pair[1], pair[2]) then return {-6, pair[1]} end
end
for i = 6, #KEYS do
  if wrongType(KEYS[i], 'zset') then return {-7, KEYS[i]} end
end

local stateKeys = {}
for i = 1, stateCount do stateKeys[ARGV[13 + i]] = KEYS[7 + i] end
if not stateKeys[state] then return {-8, state} end

local currentFence = redis.call('GET', fenceKey) or '0'
if fence ~= '' then
  if tonumber(fence) ~= tonumber(currentFence) then return {-3, currentFence} end
elseif redis.call('EXISTS', leaseKey) == 1 then
  return {-4, ''}
end

local current = redis.call('HMGET', taskKey, 'revision', 'state')
local currentRevision, oldState = current[1], current[2]
if expected == 0 then
  if currentRevision then return {-1, ''} end
elseif not currentRevision or tonumber(currentRevision) ~= expected then
  return {-2, currentRevision or ''}
end

local auditBefore, transcriptBefore = tonumber(ARGV[10]), tonumber(ARGV[11])
if redis.call('XLEN', auditKey) ~= auditBefore or redis.call('LLEN', transcriptKey) ~= transcriptBefore then
  return {-5, currentRevision or ''}
end

-- Validated; from here on every command succeeds.
redis.call('HSET', taskKey,
  'envelope', ARGV[5], 'summary', ARGV[6], 'revision', revision, 'state', state, 'fence', fence,
  'auditLength', auditBefore + auditCount, 'transcriptLength', transcriptBefore + transcriptCount)

-- unpack() is bounded by the Lua stack, so long appends go in chunks.
local function append(key, first, count)
  local last = first + count - 1
  for from = first, last, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, from, math.min(from + 999, last)))
  end
end
for i = 0, auditCount - 1 do
  redis.call('XADD', auditKey, (auditBefore + i + 1) .. '-0', 'entry', ARGV[firstEntry + i])
end
append(transcriptKey, firstEntry + auditCount, transcriptCount)

redis.call('ZADD', updatedKey, updatedAt, taskId)
if oldState and oldState ~= state and stateKeys[oldState] then
  redis.call('ZREM', stateKeys[oldState], taskId)
end
redis.call('ZADD', stateKeys[state], updatedAt, taskId)
if wakeAt ~= '' then
  redis.call('ZADD', wakeKey, wakeAt, taskId)
else
  redis.call('ZREM', wakeKey, taskId)
end
return {1, revision}
