-- Shared functions of every script that can free a lock (acquire, release,
-- kick) or issue a fencing token (fence, cancel), spliced in at load time where a
-- script says `-- #include grant-next`.
-- Scripts run their uncontended fast path before that line, so the common
-- case does not pay for creating these functions (about 3 us of the server's
-- time per call, measured with SLOWLOG on Redis 7).
--
-- Queue entries are "<deadline ms>|<grant lease ms>|<token>|<wake list key>".
-- A hand-off message pushed to the waiter's wake list is "<token>|<fence>|<lock key>";
-- on Cluster the wake list is "#<process id>", and the message is published
-- on the lock's shard channel as "#<process id>|<token>|<fence>|<lock key>".
--
-- Needs Redis >= 6.2: scripts replicate their effects (>= 5), so reading the
-- clock (TIME) may come after writes, and next-fence's SET ... GET (>= 6.2).
-- Builds on next-fence, spliced in before.

local function now_ms()
  return math.floor(clock_us() / 1000)
end

-- A queue entry's parts, or nil for an entry that is malformed or whose wait
-- deadline has passed (its owner gave up, so it must not stall the queue).
local function live_entry(entry)
  local deadline, lease, token, wake_list = string.match(entry, '^(%d+)|(%d+)|([^|]+)|(.+)$')
  if deadline and tonumber(deadline) >= now_ms() then
    return lease, token, wake_list, tonumber(deadline)
  end
  return nil
end

-- Gives the free lock to one waiter and wakes only that waiter. When it lives
-- in the calling process (its wake list is `local_list`), nothing is pushed:
-- the hand-off is returned as "<token>|<fence>" and delivered in memory.
-- Otherwise returns true.
local function grant_entry(lock_key, fence_key, local_list, lease, token, wake_list)
  local fence = fence_text(next_fence(fence_key))
  redis.call('set', lock_key, token, 'px', lease)
  if wake_list == local_list then
    return token .. '|' .. fence
  end
  if string.byte(wake_list, 1) == 35 then
    -- '#': a process on Redis Cluster, woken on the lock's own shard channel
    -- (in the lock's slot, which is all a script there may touch). Every
    -- process waiting for this key hears it; the id says whose it is.
    redis.call('spublish', lock_key .. ':wake', wake_list .. '|' .. token .. '|' .. fence .. '|' .. lock_key)
    return true
  end
  redis.call('rpush', wake_list, token .. '|' .. fence .. '|' .. lock_key)
  -- A wake list whose process vanished must not live forever.
  redis.call('pexpire', wake_list, 60000)
  return true
end

-- Gives the free lock to the oldest queued waiter that is still waiting.
-- Because this runs inside the same script that freed the lock, nobody can
-- take the lock between the release and the hand-off, which is what makes the
-- queue fair. `entry` is the queue's head when the caller popped it already.
-- Returns false when nobody waits, else what grant_entry returns.
local function grant_next(lock_key, fence_key, queue_key, local_list, entry)
  while true do
    entry = entry or redis.call('lpop', queue_key)
    if not entry then
      return false
    end
    local lease, token, wake_list = live_entry(entry)
    if lease then
      return grant_entry(lock_key, fence_key, local_list, lease, token, wake_list)
    end
    entry = nil
  end
end
