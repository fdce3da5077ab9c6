-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] wait queue
-- Run by a waiting process as a safety net: when the lock expired without a
-- release (its holder died), hand it to the next live waiter.
-- Returns the lock's remaining lease in ms (-2 when it is free).
if redis.call('exists', KEYS[1]) == 0 then
  grant_next(KEYS[1], KEYS[2], KEYS[3], now_ms())
end
return redis.call('pttl', KEYS[1])
