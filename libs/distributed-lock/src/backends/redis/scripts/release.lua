-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue,
-- KEYS[4] pass-over record: "<times the head was passed over>|<ms of the first pass>"
-- ARGV[1] token, ARGV[2] the caller's wake list, ARGV[3] most local hand-offs
-- in a row, ARGV[4] how long (ms) they may go on, ARGV[5] the fencing token
-- of the grant being given back, or '' for a plain release, ARGV[6] how often
-- the caller's process passed the lock on in memory since it last came from
-- the queue (see pass-on.lua), ARGV[7] ms since the first such pass,
-- ARGV[8] the token of a waiter in the caller's process that is not in the
-- queue, or '', and ARGV[9] the lease it is granted with
-- Compare-and-delete: only the owner's token frees the lock, so a holder whose
-- lease ran out can never delete the lock of whoever holds it now. The freed
-- lock goes straight to a queued waiter in the same atomic step.
-- Given a fencing token, the lock is freed only while that grant is still the
-- current one: a late hand-off message must not free a lock its token got
-- again since.
-- Run again after a reconnect re-sent it, it finds the token gone and answers
-- 0 without touching anything; the client tells that from a lost lock by the
-- dropped connection (see RedisLockBackend's release).
-- Returns 1 when released, 0 when the token no longer owned the lock, or
-- "<token>|<fence>" when released and handed to a waiter of the caller's
-- process, "<token>|<fence>|<passes>|<ms since the first>" when that waiter
-- passed over the head, which passes in memory then count on from.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[5] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[5] then
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lpop', KEYS[3])
if not head and ARGV[8] == '' then
  return 1
end

-- #include next-fence
-- #include grant-next

-- Lock cohorting: a waiter in the releasing process takes the lock ahead of
-- an older waiter elsewhere. It is handed over in memory, without the trip
-- through Redis that waking another process costs, which under contention is
-- most of a hand-off. The head keeps its place and is passed over at most
-- ARGV[3] times in a row, and only within ARGV[4] ms of the first pass: short
-- holds pass it several times in that window, long ones at most once. Then it
-- is served, so a waiter at position p is served within p * (ARGV[3] + 1)
-- hand-offs: nobody starves.
local most, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, token, wake_list, deadline
if head then
  lease, token, wake_list, deadline = live_entry(head)
end
if most > 0 and window > 0 and lease and wake_list ~= ARGV[2] then
  local passed, since = 0, now_ms()
  local record = redis.call('get', KEYS[4])
  if record then
    local count, first = string.match(record, '^(%d+)|(%d+)$')
    passed, since = tonumber(count) or most, tonumber(first) or 0
  end
  -- The process's passes in memory went ahead of the head as well.
  local passed_in_memory = tonumber(ARGV[6]) or 0
  if passed_in_memory > 0 then
    passed = passed + passed_in_memory
    since = math.min(since, now_ms() - (tonumber(ARGV[7]) or 0))
  end
  if passed < most and now_ms() - since < window then
    local suffix = '|' .. ARGV[2]
    -- Only the front of the queue is looked at, so a hand-off stays O(1).
    for _, entry in ipairs(redis.call('lrange', KEYS[3], 0, 15)) do
      if string.sub(entry, -#suffix) == suffix then
        local local_lease, local_token = live_entry(entry)
        if local_lease then
          redis.call('lrem', KEYS[3], 1, entry)
          local queue_ttl = redis.call('pttl', KEYS[3])
          redis.call('lpush', KEYS[3], head)
          if queue_ttl <= 0 then
            -- The queue was emptied and the push made it anew: it needs an
            -- expiry again, which the head's deadline bounds.
            queue_ttl = deadline - now_ms() + 1000
            redis.call('pexpire', KEYS[3], queue_ttl)
          end
          -- The record lives no longer than the queue it is about.
          redis.call('set', KEYS[4], string.format('%d|%.0f', passed + 1, since), 'px', queue_ttl)
          return grant_entry(KEYS[1], KEYS[2], ARGV[2], local_lease, local_token, ARGV[2])
            .. '|' .. (passed + 1) .. '|' .. string.format('%.0f', now_ms() - since)
        end
      end
    end
  end
end
redis.call('del', KEYS[4])

local handed = head and grant_next(KEYS[1], KEYS[2], KEYS[3], ARGV[2], head)
if type(handed) == 'string' then
  return handed
end
if not handed and ARGV[8] ~= '' then
  -- Nobody in the queue waits any more: the caller's own waiter, which waited
  -- in its process alone, takes the lock.
  return grant_entry(KEYS[1], KEYS[2], ARGV[2], ARGV[9], ARGV[8], ARGV[2])
end
return 1
