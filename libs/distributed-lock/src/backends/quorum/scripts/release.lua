-- KEYS[1] lock, KEYS[2] waiters, KEYS[3] waiters' liveness, KEYS[4] when the
-- lock was freed (see acquire.lua)
-- ARGV[1] token, ARGV[2] wake channel, ARGV[3] '1' to leave the queue too
-- (the caller stops waiting), '0' to give back the grant of an attempt that
-- lost and wait on, ARGV[4] waiter grace ms, and with '0': ARGV[5] the
-- waiter's arrival, ARGV[6] its wait left in ms
-- Returns 1 when the token held the lock here and it was deleted, else 0.
-- Compare-and-delete in one script: nobody can take the lock between the
-- check and the DEL, so a token whose lease ran out never deletes the lock of
-- whoever holds it now. The wake-up is published in the same step, so a
-- waiter that subscribed before its last attempt cannot miss it; it carries
-- the token, so the waiter that gave back a grant is not woken by its own.
local lock, waiters, seen, freed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]
local released = 0
if redis.call('get', lock) == token then
  redis.call('del', lock)
  released = 1
end
-- Nobody waits here, the common case: nobody to leave, nothing to publish.
if ARGV[3] == '1' and redis.call('exists', waiters) == 0 then
  return released
end
local left = 0
local clock_ms
local function now()
  if not clock_ms then
    local clock = redis.call('time')
    clock_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  return clock_ms
end
if ARGV[3] == '1' then
  left = redis.call('zrem', waiters, token)
  redis.call('hdel', seen, token)
elseif released == 1 and tonumber(ARGV[6]) > 0 then
  -- The grant had taken the waiter out of this node's queue: it gets its
  -- place back before anyone is woken, so a lost attempt costs it nothing.
  local wait = tonumber(ARGV[6])
  redis.call('zadd', waiters, ARGV[5], token)
  redis.call('hset', seen, token, string.format('%.0f|%.0f', now(), now() + wait))
  local keep = wait + tonumber(ARGV[4])
  if redis.call('pttl', waiters) < keep then
    redis.call('pexpire', waiters, keep)
    redis.call('pexpire', seen, keep)
  end
end
-- Only a change a waiter here may be waiting for is published: the lock was
-- freed, or a waiter left the queue of a free lock (it may have been the head).
if redis.call('exists', waiters) == 1 then
  if released == 1 then
    redis.call('set', freed, string.format('%.0f', now()), 'px', ARGV[4])
    redis.call('publish', ARGV[2], token)
  elseif left == 1 and redis.call('exists', lock) == 0 then
    redis.call('publish', ARGV[2], token)
  end
end
return released
