-- Takes back a purchase whose order could not be written to the database:
-- removes the buyer and returns the unit to the stock. Only when the user is
-- in the set, so running it twice gives back one unit, not two.
--
-- KEYS[1]  seckill:{coupon:<couponId>}:stock
-- KEYS[2]  seckill:{coupon:<couponId>}:buyers  (same hash tag: one cluster slot)
-- ARGV[1]  the user id
--
-- Returns  1  undone
--          0  nothing to undo (the user was not recorded)

if redis.call('SREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('INCR', KEYS[1])
  return 1
end
return 0
