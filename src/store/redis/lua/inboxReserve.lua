#!lua
--[[
  Reserves a task id for a start recorded in a queue (dispatch): the inbox counter is created at 0, so that two
  starts of one id cannot both be queued, and an erasure of the queued task finds something to erase. ARGV[1] "1"
  undoes a reservation instead (the start could not be queued): only a counter still at 0 with no task and no inbox.

  KEYS[1]  inbox sequence counter   KEYS[2]  task hash   KEYS[3]  tombstone string   KEYS[4]  inbox list

  Returns { 1, "" } reserved (or undone); { -1, "" } the id is taken; { -9, tombstone } erased.
]]
local seqKey, taskKey, tombstoneKey, inboxKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if ARGV[1] == '1' then
  if redis.call('GET', seqKey) == '0' and redis.call('EXISTS', taskKey) == 0 and redis.call('EXISTS', inboxKey) == 0 then
    redis.call('DEL', seqKey)
  end
  return {1, ''}
end
local tombstone = redis.call('GET', tombstoneKey)
if tombstone then return {-9, tombstone} end
if redis.call('EXISTS', taskKey) == 1 then return {-1, ''} end
if not redis.call('SET', seqKey, '0', 'NX') then return {-1, ''} end
return {1, ''}
