-- KEYS[1] lock, KEYS[2] wait queue, KEYS[3] pass-over record,
-- KEYS[4] fencing counter
-- ARGV[1] token the lock is stored under, ARGV[2] the new holder's queue
-- entry, ARGV[3] lease ms given to the new holder, ARGV[4] 1 to issue the
-- new holder's fencing token, else 0
-- The holder passed the lock, in memory, to a waiter of its own process. The
-- lock stays stored under the token it was granted with; only the waiter's
-- entry leaves the queue and the lease becomes the new holder's.
-- Nobody else can hand out that entry meanwhile: only a release frees the
-- lock, and the process's own commands run in order on one connection.
-- Returns 0 when the lock had been lost: the pass then gave nothing, and the
-- waiter keeps its place in the queue. Otherwise the new holder's fencing
-- token when asked for (at least the server clock in microseconds, so never
-- 0 or 1), else 1. The new holder runs only after this answer. Running twice
-- changes nothing more than running once, but for issuing a second token,
-- whose first answer nobody saw (as fence.lua does).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- A waiter that never queued in Redis (entry '') has nothing to take out,
-- and the queue stays as it was: nothing here reads it then.
if ARGV[2] ~= '' then
  redis.call('lrem', KEYS[2], 1, ARGV[2])
  -- Its last entry gone, the record of passes over its head goes too, as
  -- cancel.lua does. A record some other emptying leaves behind lives no
  -- longer than its queue would have, and until then it only ever counts
  -- against passing over a new head (its first pass is that old).
  if redis.call('exists', KEYS[2]) == 0 then
    redis.call('del', KEYS[3])
  end
end
redis.call('pexpire', KEYS[1], ARGV[3])
if ARGV[4] ~= '1' then
  return 1
end

-- #include next-fence

return next_fence(KEYS[4])
