#!lua
--[[
  Reserves a task id for a start recorded in a queue (dispatch): the inbox counter is created at 0, so that two
  starts of one id cannot both be queued, and an erasure of the queued task finds something to erase. ARGV[1] "1"
  undoes a reservation instead (the start could not be queued): only a counter still at 0 with no task and no inbox.

  A reservation is the first write of a dispatched task, so it checks the data set as a save does (see save.lua):
  after a data loss the start is refused here, before its job is queued, instead of being accepted into an empty
  data set. A reserver that learned no epoch creates the marker if there is none.

  KEYS[1]  inbox sequence counter   KEYS[2]  task hash   KEYS[3]  tombstone string   KEYS[4]  inbox list
  KEYS[5]  epoch marker (string)
  ARGV[1]  "1" undo, "0" reserve
  ARGV[2]  the epoch the reserver learned, "" for none
  ARGV[3]  a new epoch, created when the reserver learned none and there is none ("" otherwise)

  Returns { 1, "", epoch } reserved (the epoch in effect), or undone; { -1, "" } the id is taken; { -9, tombstone }
  erased; {-11, epoch found|""} the data set is not the one the reserver learned; {-12, key } the epoch marker holds
  another Redis type.
]]
local seqKey, taskKey, tombstoneKey, inboxKey, epochKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if ARGV[1] == '1' then
  if redis.call('GET', seqKey) == '0' and redis.call('EXISTS', taskKey) == 0 and redis.call('EXISTS', inboxKey) == 0 then
    redis.call('DEL', seqKey)
  end
  return {1, ''}
end
local epoch = redis.pcall('GET', epochKey)
if type(epoch) == 'table' and epoch.err then return {-12, epochKey} end
if ARGV[2] ~= '' and epoch ~= ARGV[2] then return {-11, epoch or ''} end
local tombstone = redis.call('GET', tombstoneKey)
if tombstone then return {-9, tombstone} end
if redis.call('EXISTS', taskKey) == 1 then return {-1, ''} end
if not redis.call('SET', seqKey, '0', 'NX') then return {-1, ''} end
if not epoch and ARGV[3] ~= '' then
  redis.call('SET', epochKey, ARGV[3], 'NX')
  epoch = ARGV[3]
end
return {1, '', epoch}
