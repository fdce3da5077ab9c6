-- KEYS[1] fencing counter
-- ARGV[1] a fencing token about to be handed out
-- Raises the counter to the token if it is lower; never lowers it. Read and
-- write in one step, so a higher token stored meanwhile by another holder's
-- fence.lua is never overwritten with a lower one. Returns 1.
local token = tonumber(ARGV[1])
if tonumber(redis.call('get', KEYS[1]) or '0') < token then
  redis.call('set', KEYS[1], ARGV[1], 'px', 86400000)
end
return 1
