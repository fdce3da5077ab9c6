-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] token, ARGV[2] the caller's wake list,
-- ARGV[3] (optional) the fencing token of the grant being given back
-- Compare-and-delete: only the owner's token frees the lock, so a holder whose
-- lease ran out can never delete the lock of whoever holds it now. The freed
-- lock goes straight to the next queued waiter in the same atomic step.
-- With ARGV[3], the lock is freed only while that grant is still the current
-- one: a late hand-off message must not free a lock its token got again since.
-- Returns 1 when released, 0 when the token no longer owned the lock, or
-- "<token>|<fence>" when released and handed to a waiter of the caller's process.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[3] and redis.call('get', KEYS[2]) ~= ARGV[3] then
  return 0
end
redis.call('del', KEYS[1])
local next_entry = redis.call('lpop', KEYS[3])
if not next_entry then
  return 1
end

-- #include grant-next

local handed = grant_next(KEYS[1], KEYS[2], KEYS[3], ARGV[2], next_entry)
if type(handed) == 'string' then
  return handed
end
return 1
