-- Sets the lease of token ARGV[1]'s permits to ARGV[2] ms from now, if they
-- are still held. Returns 1, or 0 when they are not (lease ended).
-- #include common
local leaseEnd = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not leaseEnd or tonumber(leaseEnd) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
tidy()
return 1
