-- The fencing-token rule, spliced in where a script says `-- #include next-fence`,
-- before anything that issues a token. Small on purpose: acquire.lua's fast
-- path pays for defining these functions on every uncontended acquisition.

-- The server clock, read at most once per run and only when needed.
local clock_us_cached
local function clock_us()
  if not clock_us_cached then
    local clock = redis.call('time')
    clock_us_cached = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  end
  return clock_us_cached
end

-- Lua would print a number this large as 1.7e+15.
local function fence_text(fence)
  return string.format('%.0f', fence)
end

-- The next fencing token of a lock: one more than the last, and at least the
-- server clock in microseconds.
-- Counting alone would go backwards whenever the counter is set back: Redis
-- restarted without persistence, the counter expired, or a failover promoted
-- a replica that had not yet received the last increments (Sentinel and
-- Cluster replicate asynchronously). The clock cannot be set back that way.
-- A token exceeds the time it was issued at only when a key is granted more
-- than once per microsecond, which a round trip per grant rules out; so every
-- token issued before a failover is at most the old master's clock then, and
-- the new master's first token, at least its clock later, is above them all,
-- as long as the new master's clock is not behind the old one's by more than
-- the failover took (seconds: Sentinel's down-after-milliseconds, Cluster's
-- node timeout). On one machine, or with NTP, it is not.
-- The counter is kept as long as the lock is used, and a day after.
-- Tokens stay below 2^53, exact in a Lua and a JavaScript number, until the
-- year 2255; returned in a reply they arrive as exact integers.
local function next_fence(fence_key)
  local fence = math.max((tonumber(redis.call('get', fence_key)) or 0) + 1, clock_us())
  redis.call('set', fence_key, fence_text(fence), 'px', 86400000)
  return fence
end
