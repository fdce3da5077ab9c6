-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- ARGV[1] the token of a holder whose process session the caller found gone,
-- or '', ARGV[2..] the queue entries of the calling process's waiters
-- Run by a waiting process as a safety net: when the lock expired without a
-- release, or its holder's session lapsed (its holder died), hand it to the
-- next live waiter. A lapsed session never comes back, so deleting the lock
-- while it still holds that holder's token is safe however long ago the
-- session was seen gone, and whatever slot the session lived in. Then tells, for
-- each given entry, whether its waiter holds the lock ('h': its wake-up was
-- lost or is on its way), is still queued ('q'), or is missing from the queue
-- ('m': Redis restarted, the queue aged out, or a hand-off to it lapsed
-- unseen), so that it can queue again.
-- Returns {remaining lease in ms (-2 when free), fence, one letter per entry,
-- the holder's token or ''}:
-- a holder among the entries gets a fencing token of its own, newly issued,
-- since the counter may hold the previous holder's (0 when none holds).
-- #include next-fence
-- #include grant-next

-- The dead holder's process is gone, and so are the waiters it queued under
-- the same session: served in turn, each would hold the lock for a hand-off
-- lease before anyone noticed. They leave the queue with it.
local function drop_session_entries(queue_key, dead_token)
  local dot = string.find(dead_token, '.', 1, true)
  if not dot then
    return
  end
  local prefix = string.sub(dead_token, 1, dot)
  local entries = redis.call('lrange', queue_key, 0, -1)
  local kept = {}
  for _, entry in ipairs(entries) do
    local token = string.match(entry, '^%d+|%d+|([^|]+)|')
    if not (token and string.sub(token, 1, #prefix) == prefix) then
      kept[#kept + 1] = entry
    end
  end
  if #kept == #entries then
    return
  end
  local ttl = redis.call('pttl', queue_key)
  redis.call('del', queue_key)
  -- Pushed back in order, in slices: unpack() of a long list overflows Lua's stack.
  for first = 1, #kept, 500 do
    redis.call('rpush', queue_key, unpack(kept, first, math.min(first + 499, #kept)))
  end
  if #kept > 0 and ttl > 0 then
    redis.call('pexpire', queue_key, ttl)
  end
end

local holder = redis.call('get', KEYS[1])
if holder and holder == ARGV[1] then
  redis.call('del', KEYS[1])
  holder = false
  drop_session_entries(KEYS[3], ARGV[1])
end
if not holder then
  grant_next(KEYS[1], KEYS[2], KEYS[3])
  holder = redis.call('get', KEYS[1])
end
local states = {}
local fence = 0
for i = 2, #ARGV do
  local entry = ARGV[i]
  local token = string.match(entry, '^%d+|%d+|([^|]+)|')
  if holder and token == holder then
    states[i - 1] = 'h'
    fence = next_fence(KEYS[2])
  elseif redis.call('lpos', KEYS[3], entry) then
    states[i - 1] = 'q'
  else
    states[i - 1] = 'm'
  end
end
return {
  redis.call('pttl', KEYS[1]),
  fence,
  table.concat(states),
  holder or '',
}
