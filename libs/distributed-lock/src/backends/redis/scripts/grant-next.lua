-- Shared functions of every script that can free a lock (acquire, release,
-- kick) or issue a fencing token (fence, cancel), spliced in at load time where a
-- script says `-- #include grant-next`.
-- Scripts run their uncontended fast path before that line, so the common
-- case does not pay for creating these functions (about 3 us of the server's
-- time per call, measured with SLOWLOG on Redis 7).
--
-- Queue entries are "<deadline ms>|<grant lease ms>|<token>|<wake list key>".
-- A hand-off message pushed to the waiter's wake list is "<token>|<fence>|<lock key>".
--
-- Needs Redis >= 5, where scripts replicate their effects, so reading the
-- clock (TIME) may come after writes.

-- The server clock, read at most once per run and only when needed: the
-- uncontended paths never look at it.
local clock_us_cached
local function clock_us()
  if not clock_us_cached then
    local clock = redis.call('time')
    clock_us_cached = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  end
  return clock_us_cached
end

local function now_ms()
  return math.floor(clock_us() / 1000)
end

-- Lua would print a number this large as 1.7e+15.
local function fence_text(fence)
  return string.format('%.0f', fence)
end

-- An idle lock's fencing counter may vanish this long after it was seeded.
local fence_retention_ms = 86400000

-- The next fencing token. Counting alone would start again at 1 whenever the
-- counter is gone (Redis restarted without persistence, a failover to a
-- replica that lagged, the counter expired), handing out tokens below ones a
-- protected resource has already seen. So a missing counter is seeded from
-- the server clock in microseconds and counts up by one from there. Every
-- token is then at most the time it was issued at: seeded at t0 and counted
-- n times by time t, it is t0 + n <= t, because a key sees far fewer than one
-- grant per microsecond. A new seed (the time now) therefore exceeds every
-- earlier token, as long as the server clock does not run backwards.
-- INCR keeps the counter's expiry, so a busy counter is re-seeded once a day,
-- which by the same argument is harmless.
-- Tokens stay below 2^53, exact in a Lua and a JavaScript number, until the
-- year 2255; returned in a reply they arrive as exact integers.
-- A counter below `seeded_min` was created by INCR, not seeded: any clock seed
-- is far above it. Scripts' fast paths test the same literal.
local seeded_min = 1e12

-- Seeds the counter from the clock; returns the token it stands for.
local function seed_fence(fence_key)
  local fence = clock_us()
  redis.call('set', fence_key, fence_text(fence), 'px', fence_retention_ms)
  return fence
end

local function next_fence(fence_key)
  local fence = redis.call('incr', fence_key)
  if fence < seeded_min then
    return seed_fence(fence_key)
  end
  return fence
end

-- A queue entry's parts, or nil for an entry that is malformed or whose wait
-- deadline has passed (its owner gave up, so it must not stall the queue).
local function live_entry(entry)
  local deadline, lease, token, wake_list = string.match(entry, '^(%d+)|(%d+)|([^|]+)|(.+)$')
  if deadline and tonumber(deadline) >= now_ms() then
    return lease, token, wake_list, tonumber(deadline)
  end
  return nil
end

-- Gives the free lock to one waiter and wakes only that waiter. When it lives
-- in the calling process (its wake list is `local_list`), nothing is pushed:
-- the hand-off is returned as "<token>|<fence>" and delivered in memory.
-- Otherwise returns true.
local function grant_entry(lock_key, fence_key, local_list, lease, token, wake_list)
  local fence = fence_text(next_fence(fence_key))
  redis.call('set', lock_key, token, 'px', lease)
  if wake_list == local_list then
    return token .. '|' .. fence
  end
  redis.call('rpush', wake_list, token .. '|' .. fence .. '|' .. lock_key)
  -- A wake list whose process vanished must not live forever.
  redis.call('pexpire', wake_list, 60000)
  return true
end

-- Gives the free lock to the oldest queued waiter that is still waiting.
-- Because this runs inside the same script that freed the lock, nobody can
-- take the lock between the release and the hand-off, which is what makes the
-- queue fair. `entry` is the queue's head when the caller popped it already.
-- Returns false when nobody waits, else what grant_entry returns.
local function grant_next(lock_key, fence_key, queue_key, local_list, entry)
  while true do
    entry = entry or redis.call('lpop', queue_key)
    if not entry then
      return false
    end
    local lease, token, wake_list = live_entry(entry)
    if lease then
      return grant_entry(lock_key, fence_key, local_list, lease, token, wake_list)
    end
    entry = nil
  end
end
