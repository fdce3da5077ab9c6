-- Shared by every semaphore script. KEYS: 1 holders (ZSET token -> lease end,
-- ms), 2 permits (HASH token -> permits held), 3 queue (ZSET token -> arrival
-- number), 4 queue liveness (ZSET token -> when the waiter's entry lapses),
-- 5 meta (HASH limit, seq, fence:<token> -> fencing token of a holder that
-- has one), 6 wants (HASH queued token -> permits it asks for). All six
-- share the semaphore's hash tag, as does acquire.lua's KEYS[7], the
-- fencing-token counter, which no script deletes.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- Runs `command` on `key` with the values of `list` as arguments, a chunk at
-- a time (Lua's unpack takes at most a few thousand values: a read-write
-- lock can have more readers queued or expiring at once). Returns the
-- replies, concatenated.
local function inChunks(command, key, list)
  local replies = {}
  for from = 1, #list, 1000 do
    local part = redis.call(command, key, unpack(list, from, math.min(from + 999, #list)))
    if type(part) == 'table' then
      for i = 1, #part do
        replies[#replies + 1] = part[i]
      end
    end
  end
  return replies
end

-- Drops holders whose lease ended and waiters that stopped renewing their
-- place; true when anything went.
local function purge()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #gone > 0 then
    inChunks('HDEL', KEYS[2], gone)
    for i = 1, #gone do
      redis.call('HDEL', KEYS[5], 'fence:' .. gone[i])
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  end
  local left = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  if #left > 0 then
    inChunks('ZREM', KEYS[3], left)
    inChunks('HDEL', KEYS[6], left)
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  end
  return #gone > 0 or #left > 0
end

-- Permits held now (after purge).
local function used()
  local total = 0
  local counts = redis.call('HVALS', KEYS[2])
  for i = 1, #counts do
    total = total + tonumber(counts[i])
  end
  return total
end

-- What the first `count` queued callers ask for together (0 for none).
local function wantedBy(count)
  if count <= 0 then
    return 0
  end
  local tokens = redis.call('ZRANGE', KEYS[3], 0, count - 1)
  local total = 0
  local wants = inChunks('HMGET', KEYS[6], tokens)
  for i = 1, #wants do
    total = total + (tonumber(wants[i]) or 1)
  end
  return total
end

-- Tells every queued caller that fits in the free permits, in queue order,
-- to try again (the message is its token); stops at the first that does not
-- fit, which keeps the queue first come, first served: nobody behind a large
-- request passes it. Each asks for at least 1, so at most `free` are read.
local function wakeFitting(channel, limit)
  local free = limit - used()
  if free <= 0 then
    return
  end
  local tokens = redis.call('ZRANGE', KEYS[3], 0, free - 1)
  if #tokens == 0 then
    return
  end
  local wants = inChunks('HMGET', KEYS[6], tokens)
  for i = 1, #tokens do
    free = free - (tonumber(wants[i]) or 1)
    if free < 0 then
      return
    end
    redis.call('PUBLISH', channel, tokens[i])
  end
end

-- The stored limit, or `fallback` when none is stored.
local function limitOr(fallback)
  return tonumber(redis.call('HGET', KEYS[5], 'limit')) or fallback
end

-- The keys live as long as the last lease or queue place, then go (the
-- limit with them): an idle semaphore leaves nothing behind.
local function tidy()
  local lastHold = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local lastWait = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  local last = 0
  if #lastHold > 0 then
    last = tonumber(lastHold[2])
  end
  if #lastWait > 0 and tonumber(lastWait[2]) > last then
    last = tonumber(lastWait[2])
  end
  if last == 0 then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
    return
  end
  for i = 1, 6 do
    redis.call('PEXPIRE', KEYS[i], last - now + 1)
  end
end
