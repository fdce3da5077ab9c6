-- KEYS[1] lock
-- ARGV[1] token, ARGV[2] lease ms
-- Returns 1 when the owner's lease was set, 0 when the token no longer owns it.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
