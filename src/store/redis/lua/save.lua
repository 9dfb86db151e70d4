#!lua
--[[
  Saves a task: one atomic compare-and-set of the envelope plus the append of its new journal entries and the
  update of every index. Every check happens before the first write, and the first write is the one that can
  still fail (the XADD, if its id is taken), so a refused save changes nothing.
  The shebang makes Redis refuse the whole script up front when it is out of memory.

  Cost does not depend on journal length: journals are never read, only measured (the transcript list) or
  appended to. The audit journal is a stream with one message per save: id "<n>-0" where n is the 1-based number
  of the save's first audit entry, fields `entries` (a JSON array of the entries) and `count`. The transcript is a
  list, one JSON entry per element.

  Fencing: a presented fence must equal the task's fence counter, i.e. nobody acquired the lease after this
  writer. A writer whose lease merely expired, with no acquisition since, is still accepted: fencing guards
  against a newer holder, and expiry alone does not create one.

  Data set: the epoch marker (KEYS[10]) must hold the epoch this writer learned, a create included, so a task whose
  records vanished with the data set (Redis restarted without persistence, flushed, failed over to an empty replica)
  is not written again into the empty or foreign one. A writer that learned none (a new process) works on what it
  finds, and creates the marker, with the save's writes, when there is none. Checked first after the arguments.

  Erasure: an id with a tombstone is refused before anything but the data set, a create included, so a writer
  that was driving the task when it was erased cannot recreate it (the erasure also deleted its fence counter).
  Owner: the task's owner index (KEYS[9]) is kept with the task, and the task hash records its key; a save that
  names another owner's index than the one recorded is refused (a task's owner never changes).

  KEYS[1]   task hash                    KEYS[6]  index: all tasks by updatedAt (zset)
  KEYS[2]   audit stream                 KEYS[7]  index: tasks by wakeAt (zset)
  KEYS[3]   transcript list              KEYS[8]  tombstone string
  KEYS[4]   fence counter (string)       KEYS[9]  index: the owner's tasks by updatedAt (zset)
  KEYS[5]   lease string (token, PX)     KEYS[10] epoch marker (string)
  KEYS[11]  index of the new state (zset)
  KEYS[12]  index of the state the writer believes the task is in now (zset; the new state's when it believes so)

  ARGV[1]   task id (the member in the indexes)
  ARGV[2]   space-separated: expected revision (0 = the task must not exist), new revision, updatedAt (ms), wakeAt
            (ms, "-" for none), audit length before the append, transcript length before the append, number of
            audit entries (A), number of transcript entries (T), where the summary's JSON starts in the envelope
            (bytes from 0) and its length, the new state's name, the name of the state of KEYS[12], and the length in
            bytes of the stored envelope the edits apply to ("-": ARGV[4] is the whole envelope)
  ARGV[3]   fence presented by the writer, "" for none
  ARGV[4]   the envelope JSON; or edits of the stored one, each "<offset>,<removed>,<added>:" (bytes; the offset in
            the stored text, the edits in order) then the added bytes (`redisEnvelopeText.ts`)
  ARGV[5]   the writing store's id: the task hash's `etag` becomes "<id>:<new revision>"; edits apply only to an
            envelope whose `etag` is "<id>:<expected revision>" (written by this store's last save)
  ARGV[6]   the audit entries as one message (`redisAuditPacking.ts`)
  ARGV[7]   the transcript entries (JSON, which holds no raw newline), joined by newlines
  ARGV[8]   the epoch the writer learned, "" for none
  ARGV[9]   a new epoch, created when the writer learned none and there is none ("" otherwise)
  ARGV[10]  the task's live-event channel ("" for none): once saved, the script publishes
            "<revision> <audit length> <transcript length>" on it, so no save goes unannounced

  Commands: the epoch marker, fence counter and lease are read with one MGET (a key of another type reads as nil
  there, so only a nil one is looked at again with TYPE); the audit stream's type is left to the XADD, the first
  write; the transcript list is measured only by a save that appends to it (the task hash records both lengths).

  Returns {code, detail[, epoch]}:
    { 1, new revision, epoch } saved; the epoch in effect
    {-1, "" }                  the task exists (expected revision 0)
    {-2, current revision|""}  revision conflict
    {-3, current fence}        the presented fence is not the current one (a newer lease was taken)
    {-4, "" }                  no fence presented while another holder has the lease
    {-5, current revision}     a journal's length differs from the one the envelope expects
    {-6, key }                 a task key holds another Redis type
    {-7, key }                 an index key holds another Redis type
    {-9, tombstone }           the task was erased (its tombstone JSON)
    {-10, recorded key }       the task belongs to another owner
    {-11, epoch found|""}      the data set is not the one the writer learned: its marker is gone or differs
    {-12, key }                the epoch marker holds another Redis type
    {-14, "" }                 edits of an envelope other than the stored one: send it whole
    {-15, state }              the task is in another state than KEYS[12]'s: send that state's index
]]
local taskKey, auditKey, transcriptKey, fenceKey, leaseKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local updatedKey, wakeKey, tombstoneKey, ownerKey, epochKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local stateKey, leftKey = KEYS[11], KEYS[12]
local taskId, fence, writer = ARGV[1], ARGV[3], ARGV[5]
local learnedEpoch, newEpoch = ARGV[8], ARGV[9]
local n = {}
for word in string.gmatch(ARGV[2], '[^ ]+') do n[#n + 1] = word end
local expected, revision, updatedAt, wakeAt = tonumber(n[1]), n[2], n[3], n[4]
local auditBefore, transcriptBefore = tonumber(n[5]), tonumber(n[6])
local auditCount, transcriptCount = tonumber(n[7]), tonumber(n[8])
local summaryAt, summaryBytes = tonumber(n[9]), tonumber(n[10])
local state, leftState, baseBytes = n[11], n[12], n[13]

-- A read that reports a wrong-typed key instead of aborting the script.
local function read(code, key, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil, {code, key} end
  return reply, nil
end

-- One read for the three strings. MGET gives nil for a key of another type: only a nil one is looked at again.
local strings = redis.call('MGET', epochKey, fenceKey, leaseKey)
local function checkString(code, key, value)
  if value then return nil end
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' then return {code, key} end
  return nil
end
local epoch, currentFence, holder = strings[1] or nil, strings[2] or nil, strings[3] or nil
local failure = checkString(-12, epochKey, epoch)
if failure then return failure end
if learnedEpoch ~= '' and epoch ~= learnedEpoch then return {-11, epoch or ''} end

local tombstone
tombstone, failure = read(-6, tombstoneKey, 'GET', tombstoneKey)
if failure then return failure end
if tombstone then return {-9, tombstone} end

local current
current, failure = read(-6, taskKey, 'HMGET', taskKey, 'revision', 'state', 'auditLength', 'owner', 'transcriptLength',
  'etag')
if failure then return failure end
local currentRevision, oldState, auditLength, recordedOwner = current[1], current[2], tonumber(current[3] or '0'), current[4]
local recordedTranscript, etag = current[5], current[6]

failure = checkString(-6, fenceKey, currentFence) or checkString(-6, leaseKey, holder)
if failure then return failure end
currentFence = currentFence or '0'
if fence ~= '' then
  if tonumber(fence) ~= tonumber(currentFence) then return {-3, currentFence} end
elseif holder then
  return {-4, ''}
end

if expected == 0 then
  if currentRevision then return {-1, ''} end
elseif not currentRevision or tonumber(currentRevision) ~= expected then
  return {-2, currentRevision or ''}
end
-- A task saved before owner indexes existed has none recorded: this save records it.
if recordedOwner and recordedOwner ~= ownerKey then return {-10, recordedOwner} end

-- The list is measured when this save appends to it (which also finds a key of another type before any write), or
-- when the hash has no length recorded (a task saved before it was); otherwise the recorded length is the list's.
local transcriptLength = tonumber(recordedTranscript or '')
if transcriptCount > 0 or not transcriptLength then
  transcriptLength, failure = read(-6, transcriptKey, 'LLEN', transcriptKey)
  if failure then return failure end
end
if auditLength ~= auditBefore or transcriptLength ~= transcriptBefore then
  return {-5, currentRevision or ''}
end

-- The state the task leaves must be the one whose index the writer sent.
if oldState and oldState ~= state and oldState ~= leftState then return {-15, oldState} end

-- The envelope: whole, or the stored one with the edits spliced in (only onto the text they were made from).
local envelope = ARGV[4]
if baseBytes ~= '-' then
  local stored = redis.call('HGET', taskKey, 'envelope')
  if etag ~= writer .. ':' .. expected or not stored or #stored ~= tonumber(baseBytes) then return {-14, ''} end
  local parts, count, from, at = {}, 0, 1, 1
  while at <= #envelope do
    local _, stop, offset, removed, added = string.find(envelope, '^(%d+),(%d+),(%d+):', at)
    if not stop then return {-14, ''} end
    offset, removed, added = tonumber(offset), tonumber(removed), tonumber(added)
    if offset + 1 < from or offset + removed > #stored or stop + added > #envelope then return {-14, ''} end
    parts[count + 1] = string.sub(stored, from, offset)
    parts[count + 2] = string.sub(envelope, stop + 1, stop + added)
    count = count + 2
    from = offset + removed + 1
    at = stop + added + 1
  end
  parts[count + 1] = string.sub(stored, from)
  envelope = table.concat(parts)
end

-- Index keys: a wrong type would fail a ZADD after the task was written, so look first.
local indexes = {updatedKey, wakeKey, ownerKey, stateKey}
if oldState and oldState ~= state then indexes[#indexes + 1] = leftKey end
for _, key in ipairs(indexes) do
  _, failure = read(-7, key, 'ZSCORE', key, taskId)
  if failure then return failure end
end

-- Writes. The XADD goes first: it is the only one that can still be refused (a message someone else added past
-- our last entry, or a key of another type), and then nothing else has been written.
if auditCount > 0 then
  local added = redis.pcall('XADD', auditKey, (auditBefore + 1) .. '-0', 'entries', ARGV[6], 'count', auditCount)
  if type(added) == 'table' and added.err then
    if string.sub(added.err, 1, 9) == 'WRONGTYPE' then return {-6, auditKey} end
    return {-5, currentRevision or ''}
  end
end
if not epoch and newEpoch ~= '' then
  redis.call('SET', epochKey, newEpoch, 'NX')
  epoch = newEpoch
end
-- The transcript entries, split at their newlines, pushed in chunks (unpack() is bounded by the Lua stack).
if transcriptCount > 0 then
  local entries, text, at = {}, ARGV[7], 1
  while true do
    local stop = string.find(text, '\n', at, true)
    if not stop then
      entries[#entries + 1] = string.sub(text, at)
      break
    end
    entries[#entries + 1] = string.sub(text, at, stop - 1)
    at = stop + 1
  end
  for from = 1, #entries, 1000 do
    redis.call('RPUSH', transcriptKey, unpack(entries, from, math.min(from + 999, #entries)))
  end
end
redis.call('HSET', taskKey,
  'envelope', envelope, 'summary', string.sub(envelope, summaryAt + 1, summaryAt + summaryBytes), 'revision', revision,
  'state', state, 'fence', fence, 'auditLength', auditBefore + auditCount,
  'transcriptLength', transcriptBefore + transcriptCount, 'owner', ownerKey, 'etag', writer .. ':' .. revision)

redis.call('ZADD', updatedKey, updatedAt, taskId)
redis.call('ZADD', ownerKey, updatedAt, taskId)
if oldState and oldState ~= state then
  redis.call('ZREM', leftKey, taskId)
end
redis.call('ZADD', stateKey, updatedAt, taskId)
if wakeAt ~= '-' then
  redis.call('ZADD', wakeKey, wakeAt, taskId)
else
  redis.call('ZREM', wakeKey, taskId)
end
local channel = ARGV[10]
if channel ~= '' then
  redis.call('PUBLISH', channel,
    revision .. ' ' .. (auditBefore + auditCount) .. ' ' .. (transcriptBefore + transcriptCount))
end
return {1, revision, epoch}
