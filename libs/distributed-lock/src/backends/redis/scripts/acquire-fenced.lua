-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] token, ARGV[2] lease ms
-- acquire.lua's fast path alone, for a caller that wants its fencing token
-- with the grant: takes a free lock nobody queues for and issues its token in
-- the same step. Two arguments instead of acquire.lua's five, and none of its
-- queueing functions to create on each run.
-- Returns the fencing token when taken, 0 otherwise (tokens are above 0).
-- On 0 the caller runs acquire.lua, which settles every other case: busy,
-- queued for (it serves the queue first), or held by this very token already
-- (ioredis re-sent this command after a dropped connection lost the answer of
-- a run that took the lock).
if not redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') then
  return 0
end
if redis.call('exists', KEYS[3]) == 1 then
  -- Taking it back cannot be seen by anyone: the script is atomic.
  redis.call('del', KEYS[1])
  return 0
end

-- #include next-fence

return next_fence(KEYS[2])
