-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] wait ms (0: do not queue),
-- ARGV[4] this process's wake list, ARGV[5] lease given on hand-off, ms
-- Returns the fencing token (a bare integer, the cheapest reply) when taken,
-- {0, pttl, entry, holder} when queued, {0, pttl, '', holder} when busy:
-- holder is the holding token, whose process session the caller may check.
-- Idempotent under re-sending (ioredis re-sends a command whose answer a
-- dropped connection lost): a token that holds the lock already is answered
-- as taken, and a waiter queued last already gets its own entry back.
local lock_key, fence_key, queue_key = KEYS[1], KEYS[2], KEYS[3]
local token, lease = ARGV[1], ARGV[2]

-- #include next-fence

-- Fast path: the lock is free and nobody queues for it.
local taken = redis.call('set', lock_key, token, 'px', lease, 'nx')
local queued = taken and redis.call('exists', queue_key) == 1
if taken and not queued then
  return next_fence(fence_key)
end

-- #include grant-next

if taken then
  -- The lock was free because its holder expired while others queued: they
  -- come first. Taking it back cannot be seen by anyone, the script is atomic.
  redis.call('del', lock_key)
  if not grant_next(lock_key, fence_key, queue_key) then
    -- Every queued waiter had given up.
    redis.call('set', lock_key, token, 'px', lease)
    return next_fence(fence_key)
  end
end

-- The caller's token holds the lock already: this command ran before and its
-- answer was lost, or the lock was handed to this waiter while it queued
-- again. The grant stands, with its lease set anew. The fencing counter may
-- still hold the previous holder's token (a bare SET issues none), so the
-- holder gets a new one: a token is never answered twice.
local holder = redis.call('get', lock_key)
if holder == token then
  redis.call('pexpire', lock_key, lease)
  return next_fence(fence_key)
end

local pttl = redis.call('pttl', lock_key)
local wait = tonumber(ARGV[3])
if wait <= 0 then
  return { 0, pttl, '', holder }
end

-- Queued last already under this token: a re-sent run answers the same entry
-- instead of queueing the waiter twice.
local mine = '|' .. token .. '|' .. ARGV[4]
local last = redis.call('lindex', queue_key, -1)
if last and string.sub(last, -#mine) == mine then
  return { 0, pttl, last, holder }
end

local grant_lease = math.min(tonumber(lease), tonumber(ARGV[5]))
local entry = (now_ms() + wait) .. '|' .. grant_lease .. '|' .. token .. '|' .. ARGV[4]
redis.call('rpush', queue_key, entry)
-- The queue lives only as long as its most patient waiter.
if redis.call('pttl', queue_key) < wait + 1000 then
  redis.call('pexpire', queue_key, wait + 1000)
end
return { 0, pttl, entry, holder }
