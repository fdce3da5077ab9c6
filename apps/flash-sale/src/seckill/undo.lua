-- Takes back purchases whose orders could not be written to the database:
-- removes each buyer and returns their unit to the stock. Only for users in
-- the set, so running it twice gives back each unit once, not twice.
--
-- KEYS[1]  seckill:{coupon:<couponId>}:stock
-- KEYS[2]  seckill:{coupon:<couponId>}:buyers  (same hash tag: one cluster slot)
-- ARGV     the user ids
--
-- Returns  the number of purchases undone

local undone = 0
for _, user in ipairs(ARGV) do
  undone = undone + redis.call('SREM', KEYS[2], user)
end
if undone > 0 then
  redis.call('INCRBY', KEYS[1], undone)
end
return undone
