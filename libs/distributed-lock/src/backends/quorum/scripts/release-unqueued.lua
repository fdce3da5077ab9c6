-- KEYS[1] lock, KEYS[2] waiters (see acquire.lua)
-- ARGV[1] token
-- release.lua's path for a node where nobody waits, with three arguments
-- instead of its eight: compare-and-delete, nothing to leave, nobody to wake.
-- Returns 1 when the token held the lock here and it was deleted, 0 when it
-- did not hold it, as release.lua would; -1, having changed nothing, when
-- someone waits here: the caller then sends release.lua, which frees the lock
-- and publishes the wake-up in one step.
if redis.call('exists', KEYS[2]) == 1 then
  return -1
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0
