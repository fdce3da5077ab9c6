-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue, KEYS[4] pass-over count
-- ARGV[1] token, ARGV[2] the waiter's queue entry
-- A waiter gives up. If the lock was handed to it meanwhile, it keeps it:
-- returns {1, fence, pttl}. Otherwise it leaves the queue: returns {0, pttl}.
-- Running twice changes nothing more than running once.
-- #include next-fence
-- #include grant-next

if redis.call('get', KEYS[1]) == ARGV[1] then
  -- A fencing token of its own: the counter may hold the previous holder's
  -- when the lock reached this token without one (a re-sent bare SET).
  return { 1, next_fence(KEYS[2]), redis.call('pttl', KEYS[1]) }
end
redis.call('lrem', KEYS[3], 1, ARGV[2])
if redis.call('exists', KEYS[3]) == 0 then
  -- Counts how often the head of a queue was passed over: no queue, no head.
  redis.call('del', KEYS[4])
end
return { 0, redis.call('pttl', KEYS[1]) }
