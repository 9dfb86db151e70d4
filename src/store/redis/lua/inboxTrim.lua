#!lua
--[[
  Drops the inbox entries a saved snapshot has applied: those whose sequence number is at most ARGV[1]. The list is
  in sequence order, so only its head is looked at.

  KEYS[1]  inbox list
  ARGV[1]  the highest applied sequence number

  Returns { removed, "" }.
]]
local inboxKey, upTo = KEYS[1], tonumber(ARGV[1])
local removed = 0
while true do
  local head = redis.call('LINDEX', inboxKey, 0)
  if not head then break end
  local seq = tonumber(string.match(head, '^(%d+) '))
  if not seq or seq > upTo then break end
  redis.call('LPOP', inboxKey)
  removed = removed + 1
end
return {removed, ''}
