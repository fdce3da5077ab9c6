-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV the queue entries of the calling process's waiters for this lock
-- Run by a waiting process as a safety net: when the lock expired without a
-- release (its holder died), hand it to the next live waiter. Then tells, for
-- each given entry, whether its waiter holds the lock ('h': its wake-up was
-- lost or is on its way), is still queued ('q'), or is missing from the queue
-- ('m': Redis restarted, the queue aged out, or a hand-off to it lapsed
-- unseen), so that it can queue again.
-- Returns {remaining lease in ms (-2 when free), fence, one letter per entry}:
-- a holder among the entries gets a fencing token of its own, newly issued,
-- since the counter may hold the previous holder's (0 when none holds).
-- #include next-fence
-- #include grant-next

if redis.call('exists', KEYS[1]) == 0 then
  grant_next(KEYS[1], KEYS[2], KEYS[3])
end
local holder = redis.call('get', KEYS[1])
local states = {}
local fence = 0
for i, entry in ipairs(ARGV) do
  local token = string.match(entry, '^%d+|%d+|([^|]+)|')
  if holder and token == holder then
    states[i] = 'h'
    fence = next_fence(KEYS[2])
  elseif redis.call('lpos', KEYS[3], entry) then
    states[i] = 'q'
  else
    states[i] = 'm'
  end
end
return {
  redis.call('pttl', KEYS[1]),
  fence,
  table.concat(states),
}
