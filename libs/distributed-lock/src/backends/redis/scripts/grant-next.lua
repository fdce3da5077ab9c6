-- Shared prelude, prepended once at load time to every script that can free a
-- lock (acquire, release, kick). Nothing here is built per call.
--
-- Queue entries are "<deadline ms>|<grant lease ms>|<token>|<wake list key>".
-- A hand-off message pushed to the waiter's wake list is "<token>|<fence>|<lock key>".
if redis.replicate_commands then
  redis.replicate_commands()
end

-- The server clock, read once per run of the script.
local clock = redis.call('time')
local clock_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local clock_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local function now_ms()
  return clock_ms
end

-- An idle lock's fencing counter may vanish after this long (see next_fence).
local fence_retention_ms = 86400000

-- The next fencing token: max(previous + 1, Redis time in microseconds).
-- Counting alone would start again at 1 whenever the counter is gone (Redis
-- restarted without persistence, a failover to a replica that lagged, the idle
-- counter expired), handing out tokens below ones a protected resource has
-- already seen. Seeding from the clock keeps every token above all earlier
-- ones, as long as the server clock does not run backwards and a key sees at
-- most one grant per microsecond (Redis runs far fewer commands than that).
-- Tokens stay below 2^53, exact in a JavaScript number, until the year 2255.
-- Returned as a string: Lua would print a number this large as 1.7e+15.
local function next_fence(fence_key)
  local previous = tonumber(redis.call('get', fence_key)) or 0
  local fence = string.format('%.0f', math.max(previous + 1, clock_us))
  redis.call('set', fence_key, fence, 'px', fence_retention_ms)
  return fence
end

-- Gives the free lock to the oldest queued waiter that is still waiting, and
-- wakes only that waiter. Entries whose wait deadline has passed are dropped:
-- their owners gave up, so they must not stall the queue. Because this runs
-- inside the same script that freed the lock, nobody can take the lock between
-- the release and the hand-off, which is what makes the queue fair.
-- When the waiter lives in the calling process (its wake list is `local_list`),
-- nothing is pushed: the hand-off is returned and delivered in memory.
-- Returns false, true, or "<token>|<fence>" for a local hand-off.
local function grant_next(lock_key, fence_key, queue_key, now, local_list)
  while true do
    local entry = redis.call('lpop', queue_key)
    if not entry then
      return false
    end
    local deadline, lease, token, wake_list = string.match(entry, '^(%d+)|(%d+)|([^|]+)|(.+)$')
    if deadline and tonumber(deadline) >= now then
      local fence = next_fence(fence_key)
      redis.call('set', lock_key, token, 'px', lease)
      if wake_list == local_list then
        return token .. '|' .. fence
      end
      redis.call('rpush', wake_list, token .. '|' .. fence .. '|' .. lock_key)
      -- A wake list whose process vanished must not live forever.
      redis.call('pexpire', wake_list, 60000)
      return true
    end
  end
end
