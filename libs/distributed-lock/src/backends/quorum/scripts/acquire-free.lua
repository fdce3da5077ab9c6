-- KEYS[1] lock, KEYS[2] waiters (see acquire.lua)
-- ARGV[1] token, ARGV[2] lease ms
-- acquire.lua's fast path alone, for a key this process has not found busy
-- lately: takes the lock if it is free and nobody waits here. Four arguments
-- instead of acquire.lua's ten or more, each of which both sides pay for on
-- every node of every round.
-- Returns 1 when granted, 0 otherwise, having changed nothing: the caller
-- then sends acquire.lua to this node, which settles every other case (busy,
-- queued for, or held by this very token after a re-send).
if redis.call('exists', KEYS[2]) == 0 then
  if redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') then
    return 1
  end
end
return 0
