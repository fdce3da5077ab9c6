-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] token
-- Returns this node's candidate for the holder's next fencing token, stored
-- as the counter, or nil when the token does not hold the lock here.
-- The ownership check and the counter's update are one atomic step, so a
-- candidate is only ever issued to the token that holds the lock on this
-- node at that moment. See quorum-fence.ts for how candidates from a
-- majority make one token.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return false
end
-- Above the counter, and at least the server clock in microseconds: a
-- counter lost with a restart (no persistence) or expired is re-seeded above
-- every token issued before, as long as clocks do not run backwards.
local clock = redis.call('time')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local candidate = math.max(tonumber(redis.call('get', KEYS[2]) or '0') + 1, now_us)
-- An idle lock's counter may vanish after a day: the clock seeds it again.
redis.call('set', KEYS[2], string.format('%.0f', candidate), 'px', 86400000)
-- Below 2^53 until the year 2255: an exact integer in the reply.
return candidate
