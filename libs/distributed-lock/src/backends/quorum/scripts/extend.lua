-- KEYS[1] lock, KEYS[2] waiters, KEYS[3] when the lock will be freed (see
-- acquire.lua)
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] waiter grace ms
-- Returns 1 when the owner's lease was set, 0 when the token does not own it.
-- Check and PEXPIRE in one script: the lease of a lock someone else took
-- meanwhile is never touched.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
-- Waiters here get their grace from the new end of the lease.
if redis.call('exists', KEYS[2]) == 1 then
  local clock = redis.call('time')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('set', KEYS[3], string.format('%.0f', now + tonumber(ARGV[2])), 'px', ARGV[2] + ARGV[3])
end
return 1
