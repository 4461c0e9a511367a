-- reinstate: ARGV = prefix, reason, and a JSON array of [id, domain]. Each entry retired with
-- that reason goes back on its domain's schedule, due now, attempts, failures and gone reset.
-- Returns {moved, malformed ids}.
local reason = ARGV[2]
local now = now_seconds()
local moved = 0
local malformed, touched = {}, {}
local K_REASON = PREFIX .. 'retired_reason'
for _, item in ipairs(cjson.decode(ARGV[3])) do
  local id, d = item[1], item[2]
  if redis.call('HGET', K_REASON, id) == reason and redis.call('ZSCORE', retired_key(d), id) then
    local raw = redis.call('HGET', K_ENTRIES, id)
    local rec = decode(raw)
    if rec == nil then
      if raw then quarantine(id, raw, malformed) end
    else
      rec[ATTEMPTS], rec[FAILURES], rec[GONE], rec[SEEN] = 0, 0, 0, math.ceil(now)
      redis.call('HSET', K_ENTRIES, id, encode(rec))
      redis.call('ZREM', retired_key(d), id)
      redis.call('ZADD', sched_key(d), now, id)
      redis.call('HDEL', K_REASON, id)
      moved = moved + 1
      touched[d] = true
    end
  end
end
for d in pairs(touched) do
  redis.call('SADD', K_DOMAINS, d)
  refresh(d, now)
end
return {moved, malformed}
