-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] wait ms (0: do not queue),
-- ARGV[4] this process's wake list, ARGV[5] lease given on hand-off, ms
-- Returns the fencing token (a bare integer, the cheapest reply) when taken,
-- {0, pttl, entry} when queued, {0, pttl} when busy.
local lock_key, fence_key, queue_key = KEYS[1], KEYS[2], KEYS[3]
local token, lease = ARGV[1], ARGV[2]

-- Fast path: the lock is free and nobody queues for it. A counter below 1e12
-- was not seeded yet (see next_fence) and takes the long way.
local taken = redis.call('set', lock_key, token, 'px', lease, 'nx')
local queued = taken and redis.call('exists', queue_key) == 1
if taken and not queued then
  local fence = redis.call('incr', fence_key)
  if fence >= 1e12 then
    return fence
  end
end

-- #include grant-next

if taken then
  if not queued then
    return seed_fence(fence_key)
  end
  -- The lock was free because its holder expired while others queued: they
  -- come first. Taking it back cannot be seen by anyone, the script is atomic.
  redis.call('del', lock_key)
  if not grant_next(lock_key, fence_key, queue_key) then
    -- Every queued waiter had given up.
    redis.call('set', lock_key, token, 'px', lease)
    return next_fence(fence_key)
  end
end

local pttl = redis.call('pttl', lock_key)
local wait = tonumber(ARGV[3])
if wait <= 0 then
  return { 0, pttl }
end

local grant_lease = math.min(tonumber(lease), tonumber(ARGV[5]))
local entry = (now_ms() + wait) .. '|' .. grant_lease .. '|' .. token .. '|' .. ARGV[4]
redis.call('rpush', queue_key, entry)
-- The queue lives only as long as its most patient waiter.
if redis.call('pttl', queue_key) < wait + 1000 then
  redis.call('pexpire', queue_key, wait + 1000)
end
return { 0, pttl, entry }
