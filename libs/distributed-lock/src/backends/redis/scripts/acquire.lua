-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] wait ms (0: do not queue),
-- ARGV[4] this process's wake list, ARGV[5] lease given on hand-off, ms
-- Returns {1, fence} when taken, {0, pttl, entry} when queued, {0, pttl} when busy.
local lock_key, fence_key, queue_key = KEYS[1], KEYS[2], KEYS[3]
local token, lease, wait = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

-- A free lock whose holder expired while others queued goes to them first.
if redis.call('exists', lock_key) == 0 and not grant_next(lock_key, fence_key, queue_key, now) then
  local fence = next_fence(fence_key)
  redis.call('set', lock_key, token, 'px', lease)
  return { 1, fence }
end

local pttl = redis.call('pttl', lock_key)
if wait <= 0 then
  return { 0, pttl }
end

local grant_lease = math.min(lease, tonumber(ARGV[5]))
local entry = (now + wait) .. '|' .. grant_lease .. '|' .. token .. '|' .. ARGV[4]
redis.call('rpush', queue_key, entry)
-- The queue lives only as long as its most patient waiter.
if redis.call('pttl', queue_key) < wait + 1000 then
  redis.call('pexpire', queue_key, wait + 1000)
end
return { 0, pttl, entry }
