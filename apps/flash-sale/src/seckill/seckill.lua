-- One purchase, atomically: is the coupon loaded, has the user bought it
-- already, is any left; if all is well, take one and record the buyer.
--
-- KEYS[1]  seckill:{coupon:<couponId>}:stock    remaining stock (a string integer)
-- KEYS[2]  seckill:{coupon:<couponId>}:buyers   set of user ids who bought
--          (one hash tag, so one slot on a Redis Cluster)
-- ARGV[1]  the user id
--
-- Returns  1  bought
--          0  sold out
--         -1  this user already bought this coupon
--         -2  the coupon's stock is not in Redis (load it from the database, then retry)

local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return -2
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return -1
end
if tonumber(remaining) <= 0 then
  return 0
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
