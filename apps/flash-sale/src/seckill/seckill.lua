-- A batch of purchases, atomically: is the coupon loaded; for each user in
-- turn, has the user bought it already, is any left; if all is well, take one
-- and record the buyer.
--
-- KEYS[1]  seckill:{coupon:<couponId>}:stock    remaining stock (a string integer)
-- KEYS[2]  seckill:{coupon:<couponId>}:buyers   set of user ids who bought
--          (one hash tag, so one slot on a Redis Cluster)
-- ARGV     the user ids, distinct
--
-- Returns  -2  the coupon's stock is not in Redis (load it from the database,
--              then retry): nothing was taken for anyone
--          else one answer per user, in ARGV's order:
--           1  bought
--           0  sold out
--          -1  this user already bought this coupon

local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return -2
end
remaining = tonumber(remaining)
local answers = {}
local bought = {}
for i, user in ipairs(ARGV) do
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    answers[i] = -1
  elseif remaining <= 0 then
    answers[i] = 0
  else
    remaining = remaining - 1
    bought[#bought + 1] = user
    answers[i] = 1
  end
end
if #bought > 0 then
  redis.call('DECRBY', KEYS[1], #bought)
  redis.call('SADD', KEYS[2], unpack(bought))
end
return answers
