-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] token, ARGV[2] lease ms
-- The bare SET NX PX of an uncontended acquisition, for a caller that wants
-- its fencing token with the grant: takes a free lock and issues its token in
-- the same step. Like that SET, it does not look at the wait queue: a lock
-- is free while waiters are queued for it only after a holder died (its
-- lease ran out), its taker's release then serves them, and the caller's
-- process sends keys it found busy lately to acquire.lua, which serves the
-- queue first. The check was one of this script's four Redis calls, and
-- Redis's time is what bounds fenced acquisitions under load (bench B).
-- Returns the fencing token when taken, 0 otherwise (tokens are above 0).
-- On 0 the caller runs acquire.lua, which settles every other case: busy, or
-- held by this very token already (ioredis re-sent this command after a
-- dropped connection lost the answer of a run that took the lock).
if not redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') then
  return 0
end

-- #include next-fence

return next_fence(KEYS[2])
