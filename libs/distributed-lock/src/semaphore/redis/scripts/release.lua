-- Gives back token ARGV[1]'s permits and drops its place in the queue; wakes
-- the queued callers that now fit (ARGV[2]: the wake channel).
-- Returns 1 when the token held permits whose lease had not ended, else 0.
-- #include common
local leaseEnd = redis.call('ZSCORE', KEYS[1], ARGV[1])
local owned = leaseEnd and tonumber(leaseEnd) > now
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[5], 'fence:' .. ARGV[1])
local queued = redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
local purged = purge()
if leaseEnd or queued == 1 or purged then
  wakeFitting(ARGV[2], limitOr(0))
end
tidy()
if owned then
  return 1
end
return 0
