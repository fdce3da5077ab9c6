-- KEYS[1] lock
-- ARGV[1] session key prefix
-- Returns {} when the lock is free here, else {holder, 1 when the holder's
-- session is gone here, else 0}. The lock and its holder's session are read
-- in one step, so the flag is about the holder returned.
local holder = redis.call('get', KEYS[1])
if not holder then
  return {}
end
if holder_session_pttl(ARGV[1], holder) == -2 then
  return { holder, 1 }
end
return { holder, 0 }
