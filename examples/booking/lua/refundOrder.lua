--[[
  Refunds part of an order, with the semantics of RefundDesk.refund, in one atomic step: a known idempotency key
  returns its refund; otherwise the order must belong to the tenant and the amount fit the refundable balance;
  then the refund is committed. The "lose the response" fault is consumed with the commit.

  KEYS[1]  orders hash: order id -> order JSON (its refundedCents: refunded before seeding)
  KEYS[2]  refunded hash: order id -> cents refunded through this service
  KEYS[3]  refunds hash: refund id -> row JSON
  KEYS[4]  keys hash: idempotency key -> refund id
  KEYS[5]  refund number counter (string integer)
  KEYS[6]  faults hash
  KEYS[7]  refund requests counter

  ARGV[1]  order id   ARGV[2]  tenant id   ARGV[3]  amount (cents)   ARGV[4]  requested by   ARGV[5]  idempotency key

  Returns:
    {1, row JSON, lost}  committed now; lost = 1 when the response is to be lost (a fault)
    {2, row JSON}        the key was seen before: its refund
    {0, code, detail}    rejected (not_found, amount_exceeds_refundable)
]]
local orderId, amount, key = ARGV[1], tonumber(ARGV[3]), ARGV[5]
redis.call('INCR', KEYS[7])

local existing = redis.call('HGET', KEYS[4], key)
if existing then return {2, redis.call('HGET', KEYS[3], existing)} end

local orderJson = redis.call('HGET', KEYS[1], orderId)
if not orderJson then return {0, 'not_found', 'no order ' .. orderId} end
local order = cjson.decode(orderJson)
if order.tenantId ~= ARGV[2] then return {0, 'not_found', 'no order ' .. orderId} end
local refunded = (tonumber(order.refundedCents) or 0) + tonumber(redis.call('HGET', KEYS[2], orderId) or '0')
if amount > order.totalCents - refunded then
  return {0, 'amount_exceeds_refundable', 'amount exceeds the refundable balance'}
end

local refundId = 'TX-' .. redis.call('INCR', KEYS[5])
local row = cjson.encode({
  refundId = refundId, orderId = orderId, amountCents = amount, requestedBy = ARGV[4], idempotencyKey = key,
})
redis.call('HSET', KEYS[3], refundId, row)
redis.call('HINCRBY', KEYS[2], orderId, amount)
redis.call('HSET', KEYS[4], key, refundId)

local lost = 0
if tonumber(redis.call('HGET', KEYS[6], 'loseRefundResponses') or '0') > 0 then
  redis.call('HINCRBY', KEYS[6], 'loseRefundResponses', -1)
  lost = 1
end
return {1, row, lost}
