-- KEYS[1] lock, KEYS[2] waiters (ZSET: token scored by arrival, ms on the
-- waiter's clock), KEYS[3] waiters' liveness (HASH: token ->
-- "<last seen ms>|<wait deadline ms>", server clock), KEYS[4] when the lock
-- was or will be freed (server ms; kept only while someone waits)
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] arrival, ARGV[4] wait left ms
-- (0: try once, do not queue), ARGV[5] waiter grace ms, ARGV[6] session key
-- prefix, ARGV[7...] holders whose session the caller saw gone on a majority
-- of the nodes
-- Returns {1} when granted; {0, pttl} when held by another, or
-- {0, ms, holder, gone} for a holder bound to a session (ms: the lesser of the
-- lock's and the session's PTTL, or the lock's when the session is gone here,
-- gone = 1); {2, ms} when free but an earlier waiter goes first (ms: until
-- that waiter lapses, should it never come back).
-- Atomic as one script: the check that the lock is free, the check that no
-- earlier live waiter is queued here, and the SET that grants it cannot be
-- split by another client's command, so this node grants the lock to one
-- token at a time and never past its own queue.
local lock, waiters, seen, freed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease = ARGV[1], ARGV[2]

-- Fast path: free and nobody waits here.
if redis.call('exists', waiters) == 0 then
  if redis.call('set', lock, token, 'px', lease, 'nx') then
    return { 1 }
  end
end

local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local wait, grace = tonumber(ARGV[4]), tonumber(ARGV[5])

local function forget(member)
  redis.call('zrem', waiters, member)
  redis.call('hdel', seen, member)
end

local function granted()
  redis.call('set', lock, token, 'px', lease)
  forget(token)
  if redis.call('exists', waiters) == 1 then
    redis.call('set', freed, string.format('%.0f', now + tonumber(lease)), 'px', lease + grace)
  end
  return { 1 }
end

local holder = redis.call('get', lock)
-- Held by this token already: the command was re-sent after its answer was
-- lost. The grant stands, with its lease set anew.
if holder == token then
  return granted()
end

-- A holder whose session is gone on a majority lost the lock everywhere: a
-- session that lapsed never comes back, so that stays true, and its holder's
-- deadline is past by then (see quorum-sessions.ts). Its lock is free, as if
-- its lease had run out. Compared and deleted in this script, so a lock
-- somebody took since is never touched; the node's queue then decides who
-- gets it, as below.
if holder then
  for i = 7, #ARGV do
    if holder == ARGV[i] then
      redis.call('del', lock)
      holder = nil
      if redis.call('exists', waiters) == 1 then
        redis.call('set', freed, string.format('%.0f', now), 'px', grace)
      end
      break
    end
  end
end

if wait > 0 then
  -- (Re)registers the waiter; its arrival never changes, so its place does
  -- not either. The lists live as long as their most patient waiter.
  redis.call('zadd', waiters, ARGV[3], token)
  redis.call('hset', seen, token, string.format('%.0f|%.0f', now, now + wait))
  local keep = wait + grace
  if redis.call('pttl', waiters) < keep then
    redis.call('pexpire', waiters, keep)
    redis.call('pexpire', seen, keep)
  end
end

if holder then
  local pttl = redis.call('pttl', lock)
  -- A session-bound lock ends with its holder's session: waiters' timers
  -- fire then. Gone here only, it may still be alive on a majority: the
  -- lock's own lease is all this node can tell.
  local session = holder_session_pttl(ARGV[6], holder)
  local left = pttl
  if session and session >= 0 and (left < 0 or session < left) then
    left = session
  end
  if wait > 0 and left >= 0 then
    redis.call('set', freed, string.format('%.0f', now + left), 'px', left + grace)
  end
  if session then
    return { 0, left, holder, session == -2 and 1 or 0 }
  end
  return { 0, pttl }
end

-- Free. A waiter counts as alive until its wait deadline, and for the grace
-- after the later of its last attempt and the moment the lock was freed: a
-- live waiter is woken then and tries again well inside the grace. One that
-- lapsed is dropped, so a dead waiter stalls the lock at most the grace.
local free_since = tonumber(redis.call('get', freed) or '0')
while true do
  local head = redis.call('zrange', waiters, 0, 0)[1]
  if not head or head == token then
    break
  end
  local last, deadline = string.match(redis.call('hget', seen, head) or '', '^(%d+)|(%d+)$')
  if last then
    local lapses = math.min(tonumber(deadline), math.max(tonumber(last), free_since) + grace)
    if lapses >= now then
      return { 2, lapses - now }
    end
  end
  forget(head)
end
return granted()
