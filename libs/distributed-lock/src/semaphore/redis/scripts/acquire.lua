-- Takes ARGV[2] permits of ARGV[3] for token ARGV[1] with a lease of ARGV[4]
-- ms, if they are free and nobody queued earlier is waiting. Busy: with
-- ARGV[5] = '1' the token takes (or keeps) its place in the queue, which
-- lapses ARGV[6] ms from now unless asked again. ARGV[7]: the wake channel.
-- ARGV[8] = '1': issue a fencing token with the grant, from the counter
-- KEYS[7] (same hash tag; never deleted nor expired, so tokens never go
-- back when the semaphore goes idle); the token is kept in meta as
-- `fence:<token>` while held, so a request sent again gets the same one.
-- Returns {1, lease ms[, fencing token]} granted, {0, ms until the earliest
-- lease ends or -1} busy, {-1, limit} when the semaphore is in use with
-- another limit.
-- #include common
local token = ARGV[1]
local permits = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local purged = purge()
local stored = redis.call('HGET', KEYS[5], 'limit')
if stored and redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  stored = false
end
if stored and tonumber(stored) ~= limit then
  return { -1, tonumber(stored) }
end
-- Sent again after a lost answer: the first run granted it already.
local leaseEnd = redis.call('ZSCORE', KEYS[1], token)
if leaseEnd then
  local issued = redis.call('HGET', KEYS[5], 'fence:' .. token)
  if issued then
    return { 1, tonumber(leaseEnd) - now, tonumber(issued) }
  end
  return { 1, tonumber(leaseEnd) - now }
end
local rank = redis.call('ZRANK', KEYS[3], token)
local ahead = rank or redis.call('ZCARD', KEYS[3])
-- Granted when it fits once everyone queued ahead of it has been served:
-- those keep room for what they asked, so nobody passes a large request.
-- Each asks for at least 1, so more than `free` ahead cannot fit.
local free = limit - used()
if ahead + permits <= free and wantedBy(ahead) + permits <= free then
  redis.call('HSET', KEYS[5], 'limit', limit)
  redis.call('HSET', KEYS[2], token, permits)
  redis.call('ZADD', KEYS[1], now + lease, token)
  if rank then
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZREM', KEYS[4], token)
    redis.call('HDEL', KEYS[6], token)
  end
  local fence
  if ARGV[8] == '1' then
    -- One more than the last, and at least the server clock in µs, as the
    -- mutex's next-fence.lua: a counter lost with a Redis restart cannot
    -- make tokens go back.
    local clockUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
    fence = math.max((tonumber(redis.call('GET', KEYS[7])) or 0) + 1, clockUs)
    local text = string.format('%.0f', fence)
    redis.call('SET', KEYS[7], text)
    redis.call('HSET', KEYS[5], 'fence:' .. token, text)
  end
  tidy()
  if fence then
    return { 1, lease, fence }
  end
  return { 1, lease }
end
if ARGV[5] == '1' then
  if not rank then
    redis.call('ZADD', KEYS[3], redis.call('HINCRBY', KEYS[5], 'seq', 1), token)
    redis.call('HSET', KEYS[6], token, permits)
  end
  redis.call('HSET', KEYS[5], 'limit', limit)
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[6]), token)
end
-- A lease or a place that lapsed may have made room for those queued.
if purged then
  wakeFitting(ARGV[7], limit)
end
if purged or ARGV[5] == '1' then
  tidy()
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then
  return { 0, tonumber(first[2]) - now }
end
return { 0, -1 }
