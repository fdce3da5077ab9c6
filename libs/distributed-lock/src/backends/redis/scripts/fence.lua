-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] token
-- Issues the holder's fencing token, or returns nil when the token no longer
-- owns the lock. Tokens are issued only here and when a lock is granted (by
-- acquire.lua, a hand-off from the queue, or pass-on.lua when the new holder
-- asked for one), and always in the same atomic step as the check that the
-- receiver holds the lock. Holds of one key never overlap in Redis's view,
-- and tokens only rise (see next-fence), so the tokens of an earlier holder are all
-- below those of any later one, however late a holder asks for its token:
-- a holder whose lease ran out gets none.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return false
end

-- #include next-fence

return next_fence(KEYS[2])
