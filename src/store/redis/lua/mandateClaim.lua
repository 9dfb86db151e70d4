#!lua
--[[
  A mandate claim, in either direction: the claim of a mandate (`mandate:<mandate id>` holds the task id) or the
  task's pointer to the mandate it holds (`mandateof:<task id>` holds the mandate id). Sets the key to ARGV[1] unless
  it holds another value, so that of two claims of one key exactly one gets it; with ARGV[2] "1", gives it back
  (deletes it only if it holds ARGV[1]).

  KEYS[1]  the claim (string)
  ARGV[1]  the value: the task id (a mandate's claim) or the mandate id (a task's pointer)
  ARGV[2]  "1" give back, "" claim

  Returns { 1, "" } claimed now (or given back); { 2, "" } held already with this value; { 0, "" } held with
  another value (nothing changed); {-6, key } the key holds another Redis type.
]]
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then return {-6, KEYS[1]} end
local current = redis.call('GET', KEYS[1])
if ARGV[2] == '1' then
  if current == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return {1, ''}
end
if current == ARGV[1] then return {2, ''} end
if current then return {0, ''} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, ''}
