-- requeue: ARGV = prefix, domain. Every entry of the domain not in flight is due now:
-- entries scheduled for later move forward, retired and dead ones go back on the schedule
-- with attempts, failures and gone reset. Returns {moved, malformed ids}.
local d = ARGV[2]
local now = now_seconds()
local moved = 0
local malformed = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', sched_key(d), '(' .. now, '+inf')) do
  redis.call('ZADD', sched_key(d), now, id)
  moved = moved + 1
end
for _, key in ipairs({retired_key(d), dead_key(d)}) do
  for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local raw = redis.call('HGET', K_ENTRIES, id)
    local rec = decode(raw)
    if rec == nil then
      if raw then quarantine(id, raw, malformed) end
    else
      rec[ATTEMPTS], rec[FAILURES], rec[GONE], rec[SEEN] = 0, 0, 0, math.ceil(now)
      redis.call('HSET', K_ENTRIES, id, encode(rec))
      redis.call('ZADD', sched_key(d), now, id)
      moved = moved + 1
    end
  end
  redis.call('DEL', key)
end
refresh(d, now)
return {moved, malformed}
