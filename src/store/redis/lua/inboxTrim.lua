#!lua
--[[
  Drops the inbox entries a saved snapshot has applied: those whose sequence number is at most ARGV[1]. The list is
  in sequence order, so only its head is looked at. An inbox left empty leaves the bucket's index of inboxes; one
  with entries left is scored with now (its last progress), so that the sweep of stranded events skips it a while.

  KEYS[1]  inbox list   KEYS[2]  index: inboxes (zset)
  ARGV[1]  the highest applied sequence number
  ARGV[2]  task id
  ARGV[3]  now (ms)

  Returns { removed, "" }.
]]
local inboxKey, indexKey, upTo = KEYS[1], KEYS[2], tonumber(ARGV[1])
local removed = 0
while true do
  local head = redis.call('LINDEX', inboxKey, 0)
  if not head then break end
  local seq = tonumber(string.match(head, '^(%d+) '))
  if not seq or seq > upTo then break end
  redis.call('LPOP', inboxKey)
  removed = removed + 1
end
if redis.call('LLEN', inboxKey) == 0 then
  redis.call('ZREM', indexKey, ARGV[2])
elseif removed > 0 then
  redis.call('ZADD', indexKey, 'XX', ARGV[3], ARGV[2])
end
return {removed, ''}
