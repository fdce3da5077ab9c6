-- Many lease renewals in one call: extend.lua once per lock.
-- KEYS[3i-2] lock, KEYS[3i-1] waiters, KEYS[3i] when the lock will be freed
-- (see acquire.lua), for the i-th renewal
-- ARGV[2i-1] token, ARGV[2i] lease ms, for the i-th renewal; the last ARGV
-- the waiter grace ms
-- Returns one entry per renewal, in order: 1 when the owner's lease was set,
-- 0 when the token does not own the lock.
-- Check and PEXPIRE of each lock within one script: the lease of a lock
-- someone else took meanwhile is never touched.
local grace = ARGV[#ARGV]
local now
local set = {}
for i = 1, #KEYS / 3 do
  local lock, waiters, freed = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local lease = ARGV[2 * i]
  if redis.call('get', lock) == ARGV[2 * i - 1] then
    redis.call('pexpire', lock, lease)
    -- Waiters here get their grace from the new end of the lease.
    if redis.call('exists', waiters) == 1 then
      if now == nil then
        local clock = redis.call('time')
        now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
      end
      redis.call('set', freed, string.format('%.0f', now + tonumber(lease)), 'px', lease + grace)
    end
    set[i] = 1
  else
    set[i] = 0
  end
end
return set
