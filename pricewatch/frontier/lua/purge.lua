-- purge: ARGV = prefix, domain. Deletes every entry of the domain (scheduled, in flight,
-- retired, dead) and its state. Returns how many entries were deleted.
local d = ARGV[2]
local deleted = 0
local function drop(ids)
  for i = 1, #ids, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #ids) do chunk[#chunk + 1] = ids[j] end
    deleted = deleted + redis.call('HDEL', K_ENTRIES, unpack(chunk))
  end
end
for _, key in ipairs({sched_key(d), retired_key(d), dead_key(d)}) do
  drop(redis.call('ZRANGE', key, 0, -1))
  redis.call('DEL', key)
end
local leased = {}
for _, id in ipairs(redis.call('ZRANGE', K_INFLIGHT, 0, -1)) do
  local v = redis.call('HGET', K_LEASES, id)
  if v then
    local _, _, ld = parse_lease(v)
    if ld == d then
      leased[#leased + 1] = id
      redis.call('ZREM', K_INFLIGHT, id)
      redis.call('HDEL', K_LEASES, id)
    end
  end
end
drop(leased)
redis.call('HDEL', K_DOMAIN_INFLIGHT, d)
redis.call('HDEL', K_DOMAIN_FETCHED, d)
redis.call('HDEL', K_PAUSED, d)
redis.call('HDEL', K_HEALTH, d)
redis.call('HDEL', K_BUDGET, d)
redis.call('HDEL', K_LIMIT_CAPS, d)
redis.call('HDEL', PREFIX .. 'limits', d)
redis.call('HDEL', K_BUDGET_TOKENS, d)
redis.call('SREM', K_DOMAINS, d)
redis.call('ZREM', K_READY, d)
return deleted
