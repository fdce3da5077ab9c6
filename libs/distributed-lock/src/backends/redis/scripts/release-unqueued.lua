-- KEYS[1] lock, KEYS[2] wait queue
-- ARGV[1] token
-- The release of a lock nobody was seen waiting for: compare-and-delete, with
-- three arguments instead of release.lua's nine. When someone queues after
-- all, it touches nothing and returns -1, and the caller runs release.lua,
-- which hands the lock over in the same step as it frees it.
-- Returns 1 when released, 0 when the token no longer owned the lock.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('exists', KEYS[2]) == 1 then
  return -1
end
redis.call('del', KEYS[1])
return 1
