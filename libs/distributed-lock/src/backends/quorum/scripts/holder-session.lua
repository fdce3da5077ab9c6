-- Prepended to the scripts that look at a lock holder's process session.
-- A token bound to a session reads '<session id>.<random>' (session-token.ts)
-- and its session's key is '<prefix>session:{<session id>}'. The nodes are
-- independent servers, not a Cluster, so a script may read that key too.
-- Returns the session's PTTL on this node (-2: gone), or nil when `token`
-- is bound to no session.
local function holder_session_pttl(prefix, token)
  local dot = string.find(token, '.', 1, true)
  if not dot or dot == 1 then
    return nil
  end
  local id = string.sub(token, 1, dot - 1)
  return redis.call('pttl', prefix .. 'session:{' .. id .. '}')
end

