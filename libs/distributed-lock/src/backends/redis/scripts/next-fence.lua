-- The fencing-token rule, spliced in where a script says `-- #include next-fence`,
-- before anything that issues a token. Small on purpose: acquire.lua's fast
-- path pays for defining these functions on every uncontended acquisition.

-- The server clock in microseconds, read at most once per run and only when
-- needed. `clock` keeps TIME's answer, {seconds, microseconds}, as text.
local clock, clock_us_cached
local function clock_us()
  if not clock_us_cached then
    clock = redis.call('time')
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
-- The counter is kept as long as the lock is used, and 23 to 24 hours after.
-- Tokens stay below 2^53, exact in a Lua and a JavaScript number, until the
-- year 2255; returned in a reply they arrive as exact integers.
-- The clock is nearly always ahead of the counter, so the counter is set to
-- it first, in the same call that reads the last token (SET ... GET, Redis
-- >= 6.2), and set once more only when the last token was not behind it. No
-- one sees the counter between the two: the script is atomic. One call
-- instead of a GET and a SET, and no number formatted as text: a tenth less
-- server time for a fenced acquisition (bench/probes/script-cost.ts).
-- That SET keeps the counter's expiry (KEEPTTL), which is set anew only when
-- the counter is new or its last token was issued in an earlier hour (tokens
-- are clock microseconds): once an hour for a lock in use, so a counter in
-- use always has more than 23 hours left. Setting it on every issue cost a
-- further tenth of a fenced acquisition's server time.
local hour_us = 3600000000
local function next_fence(fence_key)
  local now = clock_us()
  -- The clock's digits, as Lua would not print them (1.7e+15).
  local now_text = clock[1] .. string.rep('0', 6 - #clock[2]) .. clock[2]
  local last = tonumber(redis.call('set', fence_key, now_text, 'keepttl', 'get'))
  if not last or math.floor(last / hour_us) ~= math.floor(now / hour_us) then
    redis.call('pexpire', fence_key, 86400000)
  end
  last = last or 0
  if last < now then
    return now
  end
  redis.call('set', fence_key, fence_text(last + 1), 'px', 86400000)
  return last + 1
end
